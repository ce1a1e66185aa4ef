//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package mlx5

// bigEndian reports a big-endian host: the device's big-endian words are
// byte-swapped on every other.
const bigEndian = false

// Package apicheck holds the test that keeps goverbs' public API as the
// API promise in docs/stability.md describes it: no plumbing
// between goverbs' own packages in the public packages, no internal type
// in an exported declaration, closers that are io.Closers, one spelling
// for initialisms, and Get prefixes only where they mirror the C function
// users search for. TestAPICoverage keeps docs/api-coverage.md, the map of
// libibverbs and librdmacm onto goverbs, complete and its cited names real.
package apicheck

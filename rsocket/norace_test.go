//go:build !race

package rsocket_test

const raceBuild = false

//go:build !race

package valkeyrdma_test

const raceBuild = false

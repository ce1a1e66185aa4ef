//go:build !race

package cm_test

const raceBuild = false

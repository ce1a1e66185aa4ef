//go:build race

package valkeyrdma_test

// raceBuild: the race detector is on, under which x/sys/unix's race
// annotations make the command buffer of REQ_NOTIFY_CQ escape (as in
// rsocket's and cm's tests).
const raceBuild = true

//go:build race

package cm_test

// raceBuild: the race detector is on. x/sys/unix's race annotations of
// write(2) make the command buffer of uverbs.Write (REQ_NOTIFY_CQ, one per
// wait on a completion channel) escape to the heap in race builds only.
const raceBuild = true

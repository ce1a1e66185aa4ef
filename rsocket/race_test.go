//go:build race

package rsocket_test

// raceBuild: the race detector is on. x/sys/unix's race annotations of
// write(2) make the command buffer of REQ_NOTIFY_CQ (one per wait on the
// completion channel) escape to the heap in race builds only (as cm's
// tests note).
const raceBuild = true

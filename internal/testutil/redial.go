package testutil

import (
	"fmt"
	"testing"
)

// MaxRedials is how many times a test connects again after the kernel
// refused its CONNECT with EADDRNOTAVAIL.
const MaxRedials = 2

// Redial is a test's allowance of connects again after siw's rare
// EADDRNOTAVAIL at CONNECT. siw binds a TCP socket to the port rdma_cm
// chose and connects from it, and now and then the kernel finds that
// address taken (docs/providers.md; the cause is not found, TIME_WAIT is
// ruled out). No request reached the server then, and a new ID has a new
// port. The zero value is ready to use.
type Redial struct {
	n int // connects made again so far
}

// Again reports whether to connect again after a connect that failed:
// refused says whether it failed with EADDRNOTAVAIL where a new attempt
// may go (the caller's test: its server still running, on iWARP where
// that matters), at most MaxRedials times. Each time it logs what and
// detail with the TCP table, the evidence a socket holding the 4-tuple
// would leave.
func (r *Redial) Again(t testing.TB, refused bool, what string, detail ...any) bool {
	t.Helper()
	if !refused || r.n == MaxRedials {
		return false
	}
	r.n++
	t.Logf("%s got EADDRNOTAVAIL (attempt %d); connecting again. TCP sockets after the failure:\n%s\n%s",
		what, r.n, TCPTable(), fmt.Sprint(detail...))
	return true
}

package testutil

import (
	"math/rand/v2"
	"sync/atomic"
)

// Ports for test servers come from [portLow, portLow+portSpan): below the
// kernel's ephemeral range (32768 up), where rdma_cm picks the source
// ports of clients.
const (
	portLow  = 10000
	portSpan = 20000
)

var (
	portStart = rand.IntN(portSpan)
	portNext  atomic.Int32
)

// Port returns a TCP port for a test server. No earlier call in this
// process returned it, and the sequence starts at a random place in each
// process, so the test binaries of a run, which follow one another in one
// VM, do not listen on the ports the binary before them just used while
// its connections may still be closing.
func Port() int {
	n := int(portNext.Add(1))
	return portLow + (portStart+n)%portSpan
}

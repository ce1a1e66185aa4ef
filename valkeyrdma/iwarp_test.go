package valkeyrdma_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/valkeyrdma"
	"github.com/goverbs/goverbs/verbs"
)

// On an iWARP device (siw) the transport cannot work: Valkey's sends all
// data as RDMA WRITE WITH IMMEDIATE, which iWARP lacks, and relies on RNR
// retry, which iWARP does not have. Dial says so with an error wrapping
// verbs.ErrNotCapable, at once, rather than failing later on the wire.
func TestIWARPRefused(t *testing.T) {
	dev := testutil.Device(t)
	testutil.SkipUnlessCap(t, dev.NodeType.Transport() == verbs.TransportIWARP,
		"an iWARP transport (this checks that valkeyrdma refuses one)")
	l, err := valkeyrdma.Listen("tcp", net.JoinHostPort(testutil.Addr(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = valkeyrdma.Dial(timeout(t, time.Minute), "tcp", l.Addr().String())
	if !errors.Is(err, verbs.ErrNotCapable) {
		t.Fatalf("Dial on %s: %v, want an error wrapping verbs.ErrNotCapable", dev.Name, err)
	}
	t.Logf("Dial on %s: %v", dev.Name, err)
}

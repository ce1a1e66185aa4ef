// Package nettest runs golang.org/x/net/nettest's TestConn, the reference
// suite of the net.Conn contract, against rsocket.Conn on the test bed.
// It is a module of its own so that the library's go.mod keeps only
// x/sys and go-cmp:
//
//	cd rsocket/nettest && go test -exec ../../hack/vm/go-test-exec .
package nettest

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rsocket"
)

func TestConn(t *testing.T) {
	testutil.Device(t) // every device: iWARP's variant (a WRITE and a SEND per message) too
	addr := testutil.Addr(t)
	for _, tc := range []struct {
		name string
		opts []rsocket.Option
	}{
		{"defaults", nil},
		{"small", []rsocket.Option{rsocket.ReceiveBufferSize(8 << 10), rsocket.SendBufferSize(4 << 10),
			rsocket.SendQueueSize(16), rsocket.ReceiveQueueSize(16), rsocket.InlineSize(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				l, err := rsocket.Listen("tcp", net.JoinHostPort(addr, "0"), tc.opts...)
				if err != nil {
					return nil, nil, nil, err
				}
				defer l.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				d, err := rsocket.Dial(ctx, "tcp", l.Addr().String(), tc.opts...)
				if err != nil {
					return nil, nil, nil, err
				}
				a, err := l.AcceptContext(ctx)
				if err != nil {
					d.Close()
					return nil, nil, nil, err
				}
				return d, a, func() { d.Close(); a.Close() }, nil
			})
		})
	}
}

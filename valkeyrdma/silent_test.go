package valkeyrdma

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil/conntest"
	"github.com/goverbs/goverbs/qp"
)

// A peer that stops answering without a word (no DREQ, as when its host
// dies) is found by the keepalive: the device retries the Keepalive's
// SEND, gives up, and a blocked Read fails with ETIMEDOUT instead of
// waiting for ever.
func TestKeepaliveFindsSilentPeer(t *testing.T) {
	conntest.KeepaliveFindsSilentPeer(t, conntest.SilentPeer[*Conn]{
		Pipe: func(t *testing.T, addr string, ka time.Duration) (*Conn, *Conn) {
			l := conntest.Listening[*Listener](t)(Listen("tcp", net.JoinHostPort(addr, "0"), Keepalive(ka)))
			return conntest.Pipe(t, l, func(ctx context.Context, address string) (*Conn, error) {
				return Dial(ctx, "tcp", address, Keepalive(ka))
			})
		},
		QP:      func(c *Conn) (*qp.QP, *sync.Mutex) { return c.qp, &c.mu },
		Retries: transportRetries,
	})
}

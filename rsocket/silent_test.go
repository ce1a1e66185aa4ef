package rsocket

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/conntest"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// A peer that stops answering without a word — no in-band disconnect, no
// DREQ, as when its host dies — is found by the keepalive: the device
// retries the keepalive's RDMA WRITE, gives up, and the blocked Read fails
// (ETIMEDOUT) instead of waiting for ever.
func TestKeepaliveFindsSilentPeer(t *testing.T) {
	conntest.KeepaliveFindsSilentPeer(t, conntest.SilentPeer[*Conn]{
		Pipe: func(t *testing.T, addr string, ka time.Duration) (*Conn, *Conn) {
			l := conntest.Listening[*Listener](t)(Listen("tcp", net.JoinHostPort(addr, "0"), KeepAlive(ka)))
			return conntest.Pipe(t, l, func(ctx context.Context, address string) (*Conn, error) {
				return Dial(ctx, "tcp", address, KeepAlive(ka))
			})
		},
		QP:      func(c *Conn) (*qp.QP, *sync.Mutex) { return c.qp, &c.mu },
		Retries: transportRetries,
	})
}

// A connection uses the variant of the protocol the device's transport
// calls for (rs_create_ep: RS_OPT_MSG_SEND when the device reports
// iWARP), both ends of it, and carries data both ways in it.
func TestTransportVariant(t *testing.T) {
	dev := testutil.Device(t)
	addr := testutil.Addr(t)
	l, err := Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc := make(chan *Conn, 1)
	go func() {
		c, err := l.AcceptContext(ctx)
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	d, err := Dial(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := <-acc
	if a == nil {
		return
	}
	defer a.Close()
	iwarp := dev.NodeType.Transport() == verbs.TransportIWARP
	for _, c := range []*Conn{d, a} {
		if c.s.msgSend != iwarp || c.iwarp != iwarp {
			t.Errorf("%s (transport %v): RS_OPT_MSG_SEND %v, want %v", dev.Name, dev.NodeType.Transport(), c.s.msgSend, iwarp)
		}
	}
	msg := make([]byte, 100<<10)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	for _, dir := range [][2]*Conn{{d, a}, {a, d}} {
		errc := make(chan error, 1)
		go func() { _, err := dir[0].Write(msg); errc <- err }()
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(dir[1], got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatal("data differs")
		}
	}
	t.Logf("%s: dialer got %v; acceptor got %v", dev.Name, Stats(d), Stats(a))
}

// Package cmpair connects testutil's QP pairs through rdma_cm on devices
// whose transport connects QPs only that way (iWARP: the kernel drives the
// QP states from the TCP connection). Test packages import it for its side
// effect:
//
//	import _ "github.com/goverbs/goverbs/internal/testutil/cmpair"
//
// It is separate from testutil because cm's own internal tests import
// testutil, and cm imports the object packages.
package cmpair

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

func init() { testutil.ConnectCM = connect }

// connect creates two RC QPs in pd (a the active side, b the passive one)
// and connects them to each other over the test address through rdma_cm.
// The IDs own the QPs; everything is closed when the test ends.
func connect(t testing.TB, pd *verbs.PD, a, b qp.Options) (*qp.QP, *qp.QP) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := cm.NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	if err := ch.AttachContext(pd.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := ch.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Bind(netip.AddrPortFrom(netip.MustParseAddr(testutil.Addr(t)), 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	info, err := l.Query()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		q   *qp.QP
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, _, err := l.GetRequest(ctx)
		if err != nil {
			done <- result{err: err}
			return
		}
		t.Cleanup(func() { id.Close() })
		q, err := id.CreateQP(pd, b)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{q: q, err: id.Accept(ctx, cm.ConnParam{ResponderResources: cm.MaxRDAtomic, InitiatorDepth: cm.MaxRDAtomic})}
	}()
	// siw's rare refusal at CONNECT (testutil.Redial): the server has
	// seen no request, and a new ID, on a new port, tries again.
	var qa *qp.QP
	var cerr error
	var redial testutil.Redial
	for {
		var cli *cm.ID
		cli, qa = client(t, ctx, ch, pd, info.Src, a)
		_, cerr = cli.Connect(ctx, cm.ConnParam{ResponderResources: cm.MaxRDAtomic, InitiatorDepth: cm.MaxRDAtomic})
		if !redial.Again(t, errors.Is(cerr, unix.EADDRNOTAVAIL), "connect a pair through rdma_cm", cerr) {
			break
		}
		cli.Close()
	}
	if cerr != nil {
		cancel() // no request is coming: end the server's wait now
	}
	r := <-done
	if err := errors.Join(cerr, r.err); err != nil {
		t.Fatalf("connect a pair through rdma_cm: %v", err)
	}
	return qa, r.q
}

// client creates the active side's ID on ch, resolves it to dst and
// creates its QP in pd; the ID is closed when the test ends.
func client(t testing.TB, ctx context.Context, ch *cm.Channel, pd *verbs.PD, dst netip.AddrPort, o qp.Options) (*cm.ID, *qp.QP) {
	t.Helper()
	cli, err := ch.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if err := cli.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		t.Fatal(err)
	}
	if err := cli.ResolveRoute(ctx); err != nil {
		t.Fatal(err)
	}
	qa, err := cli.CreateQP(pd, o)
	if err != nil {
		t.Fatal(err)
	}
	return cli, qa
}

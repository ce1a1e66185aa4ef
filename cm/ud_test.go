package cm_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// PS_UDP: the connect is a SIDR exchange that tells the client the
// server's QP number, Q_Key and address; then datagrams flow.
func TestUDOverCM(t *testing.T) {
	testutil.SkipUnlessCap(t, !iwarp(t), "UD QPs (transport iWARP has RC only)")
	srvCh, cliCh := channel(t), channel(t)
	l, addr := listen(t, srvCh, cm.UDP)
	type res struct {
		e   *end
		req cm.Event
		err error
	}
	done := make(chan res, 1)
	go func() {
		id, ev, err := l.GetRequest(timeout(t))
		if err != nil {
			done <- res{err: err}
			return
		}
		s, err := setupErr(id)
		if err != nil {
			done <- res{err: err}
			return
		}
		if err := s.qp.PostRecv([]verbs.RecvWR{{WRID: 7, SGList: []verbs.SGE{{Addr: s.buf.IOVA(), Length: 40 + 256, LKey: s.buf.LKey()}}}}); err != nil {
			done <- res{err: err}
			return
		}
		done <- res{s, ev, id.Accept(timeout(t), cm.ConnParam{})}
	}()
	cli := setup(t, dial(t, cliCh, cm.UDP, addr))
	hello, _ := cm.EncodePrivateData([]byte("udp-hello"))
	ev, err := cli.id.Connect(timeout(t), cm.ConnParam{PrivateData: hello})
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	srv := r.e
	if got, _ := cm.DecodePrivateData(r.req.UD.PrivateData); string(got) != "udp-hello" {
		t.Errorf("SIDR request private data %q", r.req.UD.PrivateData)
	}
	if ev.UD.QPNum != srv.qp.QPN() || ev.UD.QKey == 0 || !ev.UD.AH.IsGlobal {
		t.Fatalf("established: %+v, server QP %d", ev.UD, srv.qp.QPN())
	}
	ah, err := cli.pd.CreateAH(&ev.UD.AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	if err := cli.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		InlineData: []byte("datagram!"), AH: ah, RemoteQPN: ev.UD.QPNum, RemoteQKey: ev.UD.QKey}}); err != nil {
		t.Fatal(err)
	}
	testutil.Completions(t, cli.cq, 1)
	wc := testutil.Completions(t, srv.cq, 1)[0]
	if wc.Status != verbs.WCSuccess || wc.ByteLen != 40+9 || wc.SrcQP != cli.qp.QPN() ||
		!bytes.Equal(srv.buf.Bytes()[40:49], []byte("datagram!")) {
		t.Fatalf("UD receive %+v %q", wc, srv.buf.Bytes()[40:49])
	}
}

// An ID and its pending events move to another channel.
func TestMigrate(t *testing.T) {
	a, b := channel(t), channel(t)
	l, addr := listen(t, a, cm.TCP)
	cliCh := channel(t)
	cliErr := make(chan error, 1)
	go func() {
		id, err := dialErr(timeout(t), cliCh, cm.TCP, addr)
		if err == nil {
			_, err = setupErr(id)
		}
		if err == nil {
			_, err = id.Connect(timeout(t), cm.ConnParam{})
		}
		cliErr <- err
	}()
	// Wait until a request is queued on the listener, then migrate it.
	id, _, err := l.GetRequest(timeout(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Migrate(b); err != nil {
		t.Fatal(err)
	}
	if id.Channel() != b {
		t.Fatal("ID still on its old channel")
	}
	setup(t, id)
	// Events of the migrated ID now come through b.
	if err := id.Accept(timeout(t), cm.ConnParam{}); err != nil {
		t.Fatalf("accept on the migrated ID: %v", err)
	}
	if err := <-cliErr; err != nil {
		t.Fatalf("client: %v", err)
	}
	// Closing the channel the ID came from leaves it, its QP and its
	// device context alone.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	connectedState(t, id.QP()) // the migrated ID's QP after its old channel closed
	if err := id.Disconnect(); err != nil {
		t.Fatalf("disconnect after the old channel closed: %v", err)
	}
	if err := l.Migrate(b); !errors.Is(err, cm.ErrClosed) {
		t.Fatalf("migrating an ID of a closed channel: %v", err)
	}
	if _, err := l.Event(context.Background()); !errors.Is(err, cm.ErrClosed) {
		t.Fatalf("Event on a closed ID: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fresh, err := b.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Event(ctx); err != context.Canceled {
		t.Fatalf("Event with a cancelled context: %v", err)
	}
}

// A migrated ID keeps its uid: it must not collide with the uid of an ID
// the new channel already has, or one of them would get the other's
// events.
func TestMigrateKeepsIDsApart(t *testing.T) {
	from, to := channel(t), channel(t)
	resident, err := to.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	mover, err := from.CreateID(cm.TCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := mover.Migrate(to); err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(netip.MustParseAddr(testutil.Addr(t)), 7)
	for name, id := range map[string]*cm.ID{"resident": resident, "migrated": mover} {
		if err := id.ResolveAddr(timeout(t), netip.AddrPort{}, dst); err != nil {
			t.Fatalf("%s ID: resolve: %v", name, err)
		}
	}
}

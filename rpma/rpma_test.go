package rpma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
	"golang.org/x/sys/unix"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newPeer(t *testing.T) *rpma.Peer {
	t.Helper()
	testutil.Device(t)
	ibv, err := rpma.GetIBVContext(tctx(t), testutil.Addr(t), rpma.IBVContextLocal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ibv.Close() })
	p, err := rpma.NewPeer(ibv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func alloc(t *testing.T, p *rpma.Peer, size int, usage rpma.Usage) *rpma.LocalMR {
	t.Helper()
	buf, err := mr.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.RegisterMR(buf.Bytes(), usage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); buf.Close() })
	return m
}

// pair connects a client and a server peer. srvPdata and cliPdata are the
// private data each side sends; the callbacks prepare a request before it
// connects (post receives).
type pair struct {
	srv, cli *rpma.Conn
}

func connect(t *testing.T, p *rpma.Peer, srvCfg, cliCfg *rpma.ConnCfg, srvPdata, cliPdata []byte,
	srvPrep, cliPrep func(*rpma.ConnReq)) pair {
	t.Helper()
	return connectPeers(t, p, p, srvCfg, cliCfg, srvPdata, cliPdata, srvPrep, cliPrep)
}

// connectPeers is connect with the server on srvP and the client on cliP.
func connectPeers(t *testing.T, srvP, p *rpma.Peer, srvCfg, cliCfg *rpma.ConnCfg, srvPdata, cliPdata []byte,
	srvPrep, cliPrep func(*rpma.ConnReq)) pair {
	t.Helper()
	ep, err := srvP.Listen(testutil.Addr(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	type res struct {
		c   *rpma.Conn
		err error
	}
	done := make(chan res, 1)
	go func() {
		req, err := ep.NextConnReq(tctx(t), srvCfg)
		if err != nil {
			done <- res{err: err}
			return
		}
		if srvPrep != nil {
			srvPrep(req)
		}
		c, err := req.Connect(tctx(t), srvPdata)
		done <- res{c, err}
	}()
	req, err := p.NewConnReq(tctx(t), testutil.Addr(t), ep.Port(), cliCfg)
	if err != nil {
		t.Fatal(err)
	}
	if cliPrep != nil {
		cliPrep(req)
	}
	cli, err := req.Connect(tctx(t), cliPdata)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, c := range []*rpma.Conn{cli, r.c} {
		if ev, err := c.NextEvent(tctx(t)); err != nil || ev != rpma.ConnEstablished {
			t.Fatalf("first event %v %v", ev, err)
		}
	}
	t.Cleanup(func() { cli.Close(); r.c.Close() })
	return pair{srv: r.c, cli: cli}
}

func waitWC(t *testing.T, cq *rpma.CQ) verbs.WorkCompletion {
	t.Helper()
	wc := make([]verbs.WorkCompletion, 1)
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := cq.GetWC(wc)
		if err == nil && n == 1 {
			return wc[0]
		}
		if !errors.Is(err, rpma.ErrNoCompletion) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConnectionPrivateDataAndClose(t *testing.T) {
	p := newPeer(t)
	c := connect(t, p, nil, nil, []byte("Hello client!\x00"), []byte("Hello server!\x00"), nil, nil)
	// The kernel pads: 56 bytes reach the server, 196 the client
	// (iWARP's MPA carries the 14 bytes as they are).
	srvLen, cliLen := 56, 196
	if iwarp(t) {
		srvLen, cliLen = 14, 14
	}
	if got := c.srv.PrivateData(); len(got) != srvLen || string(got[:14]) != "Hello server!\x00" {
		t.Errorf("server got %d bytes %q", len(got), got)
	}
	if got := c.cli.PrivateData(); len(got) != cliLen || string(got[:14]) != "Hello client!\x00" {
		t.Errorf("client got %d bytes %q", len(got), got)
	}
	if c.cli.QPNum() == 0 || c.cli.QPNum() == c.srv.QPNum() {
		t.Errorf("QP numbers %d %d", c.cli.QPNum(), c.srv.QPNum())
	}
	// A disconnect by one side closes both.
	if err := c.cli.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev, err := c.srv.NextEvent(tctx(t)); err != nil || ev != rpma.ConnClosed {
		t.Fatalf("server after client disconnect: %v %v", ev, err)
	}
	if err := c.srv.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev, err := c.cli.NextEvent(tctx(t)); err != nil || ev != rpma.ConnClosed {
		t.Fatalf("client: %v %v", ev, err)
	}
}

// iwarp reports whether the test device's transport is iWARP (private
// data unpadded, a refused TCP connect reported by CONNECT itself).
func iwarp(t testing.TB) bool {
	return testutil.Device(t).NodeType.Transport() == verbs.TransportIWARP
}

func TestRejected(t *testing.T) {
	p := newPeer(t)
	ep, err := p.Listen(testutil.Addr(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	go func() {
		if req, err := ep.NextConnReq(tctx(t), nil); err == nil {
			req.Close()
		}
	}()
	req, err := p.NewConnReq(tctx(t), testutil.Addr(t), ep.Port(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := req.Connect(tctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ev, err := c.NextEvent(tctx(t)); err != nil || ev != rpma.ConnRejected {
		t.Fatalf("deleted request: %v %v", ev, err)
	}
	// Nobody listening on the port: rejected too.
	req, err = p.NewConnReq(tctx(t), testutil.Addr(t), "9", nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := req.Connect(tctx(t), nil)
	if err != nil && iwarp(t) && errors.Is(err, unix.ECONNREFUSED) {
		return // iWARP: the TCP connect in rdma_connect itself is refused
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if ev, _ := c2.NextEvent(tctx(t)); ev != rpma.ConnRejected {
		t.Fatalf("no listener: %v", ev)
	}
	req, err = p.NewConnReq(tctx(t), testutil.Addr(t), "9", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.Connect(tctx(t), []byte{}); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("empty private data: %v", err)
	}
}

// The server exposes a region in its private data; the client writes,
// flushes (an 8-byte READ underneath), reads back, and writes atomically.
func TestWriteFlushReadAtomic(t *testing.T) {
	p := newPeer(t)
	srvMR := alloc(t, p, 4096, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	pdata := append(srvMR.Descriptor(), (&rpma.PeerCfg{}).Descriptor()...)
	c := connect(t, p, nil, nil, pdata, nil, nil, nil)
	remote, err := rpma.RemoteMRFromDescriptor(c.cli.PrivateData()[:rpma.DescriptorSize])
	if err != nil {
		t.Fatal(err)
	}
	pc, err := rpma.PeerCfgFromDescriptor(c.cli.PrivateData()[rpma.DescriptorSize:])
	if err != nil {
		t.Fatal(err)
	}
	c.cli.ApplyRemotePeerCfg(pc)
	if remote.Size() != 4096 || remote.FlushType() != rpma.UsageFlushVisibility {
		t.Fatalf("remote %+v", remote)
	}
	local := alloc(t, p, 4096, rpma.UsageWriteSrc|rpma.UsageReadDst)
	copy(local.Bytes(), "Hello world!")
	if err := c.cli.Write(remote, 0, local, 0, 1024, rpma.OnError, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.cli.Flush(remote, 0, 1024, rpma.FlushVisibility, rpma.Always, 0xF01D); err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, c.cli.CQ())
	if wc.Status != verbs.WCSuccess || wc.WRID != 0xF01D || wc.Opcode != verbs.WCRDMARead || wc.ByteLen != 8 {
		t.Fatalf("flush completion %+v", wc)
	}
	if string(srvMR.Bytes()[:12]) != "Hello world!" {
		t.Fatalf("server memory %q", srvMR.Bytes()[:12])
	}
	// Persistent flush: refused without the peer's direct write, and
	// without the region's usage.
	if err := c.cli.Flush(remote, 0, 8, rpma.FlushPersistent, rpma.Always, 0); !errors.Is(err, rpma.ErrNotSupported) {
		t.Errorf("persistent flush without direct write: %v", err)
	}
	c.cli.ApplyRemotePeerCfg(&rpma.PeerCfg{DirectWriteToPMem: true})
	if err := c.cli.Flush(remote, 0, 8, rpma.FlushPersistent, rpma.Always, 0); !errors.Is(err, rpma.ErrNotSupported) {
		t.Errorf("persistent flush on a visibility-only region: %v", err)
	}
	// Read back 12 bytes at offset 0 into local+100.
	if err := c.cli.Read(local, 100, remote, 0, 12, rpma.Always, 5); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, c.cli.CQ()); wc.Opcode != verbs.WCRDMARead || string(local.Bytes()[100:112]) != "Hello world!" {
		t.Fatalf("read %+v %q", wc, local.Bytes()[100:112])
	}
	// Atomic write: unaligned refused; aligned lands, completing as an
	// ATOMIC WRITE where the device has it (6.12), else as the emulating
	// 8-byte RDMA WRITE (6.1).
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], 0x1122334455667788)
	if err := c.cli.AtomicWrite(remote, 1028, v, rpma.Always, 0); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("unaligned atomic write: %v", err)
	}
	if err := c.cli.AtomicWrite(remote, 2048, v, rpma.Always, 6); err != nil {
		t.Fatal(err)
	}
	caps, err := p.Context().CapFlags()
	if err != nil {
		t.Fatal(err)
	}
	wantOp := verbs.WCRDMAWrite
	if caps&verbs.DeviceCapAtomicWrite != 0 {
		wantOp = verbs.WCAtomicWrite
	}
	if p.NativeAtomicWrite() != (wantOp == verbs.WCAtomicWrite) {
		t.Errorf("NativeAtomicWrite %v with capability flags %#x", p.NativeAtomicWrite(), caps)
	}
	if wc := waitWC(t, c.cli.CQ()); wc.Status != verbs.WCSuccess || wc.Opcode != wantOp || wc.WRID != 6 {
		t.Fatalf("atomic write %+v, want %v", wc, wantOp)
	}
	if !bytes.Equal(srvMR.Bytes()[2048:2056], v[:]) {
		t.Fatal("atomic write data")
	}
	// flags 0 and mixed NULL forms are invalid; the 0-byte read is not.
	if err := c.cli.Write(remote, 0, local, 0, 8, 0, 0); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("flags 0: %v", err)
	}
	if err := c.cli.Read(nil, 0, remote, 0, 8, rpma.Always, 0); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("mixed NULL read: %v", err)
	}
	if err := c.cli.Read(nil, 0, nil, 0, 0, rpma.Always, 9); err != nil {
		t.Errorf("0-byte read: %v", err)
	} else if wc := waitWC(t, c.cli.CQ()); wc.WRID != 9 || wc.Status != verbs.WCSuccess {
		t.Errorf("0-byte read %+v", wc)
	}
	if _, err := c.cli.CQ().GetWC(nil); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("GetWC into nothing: %v", err)
	}
	if _, err := c.cli.CQ().GetWC(make([]verbs.WorkCompletion, 4)); !errors.Is(err, rpma.ErrNoCompletion) {
		t.Errorf("empty CQ: %v", err)
	}
}

// Messages with immediates, a receive CQ and a shared channel.
func TestMessagesImmediatesRCQ(t *testing.T) {
	testutil.SkipUnlessCap(t, testutil.Device(t).NodeType.Transport() != verbs.TransportIWARP, "immediate data (transport iWARP)")
	p := newPeer(t)
	srvBuf := alloc(t, p, 4096, rpma.UsageRecv|rpma.UsageSend|rpma.UsageWriteDst)
	cliBuf := alloc(t, p, 4096, rpma.UsageRecv|rpma.UsageSend|rpma.UsageWriteSrc)
	cfg := rpma.NewConnCfg()
	cfg.RCQSize = 10
	cfg.SharedChannel = true
	c := connect(t, p, cfg, rpma.NewConnCfg(), srvBuf.Descriptor(), nil,
		func(r *rpma.ConnReq) { r.Recv(srvBuf, 0, 8, 1) }, nil)
	if c.srv.RCQ() == nil || c.cli.RCQ() != nil {
		t.Fatal("receive CQs")
	}
	if fd, err := c.srv.ComplFD(); err != nil || fd < 0 {
		t.Fatalf("ComplFD: %d %v", fd, err)
	}
	if _, err := c.cli.ComplFD(); !errors.Is(err, rpma.ErrNotSharedChannel) {
		t.Errorf("ComplFD unshared: %v", err)
	}
	if err := c.srv.CQ().Wait(tctx(t)); !errors.Is(err, rpma.ErrSharedChannel) {
		t.Errorf("CQ.Wait on a shared channel: %v", err)
	}
	if _, _, err := c.cli.Wait(tctx(t)); !errors.Is(err, rpma.ErrNotSharedChannel) {
		t.Errorf("Conn.Wait unshared: %v", err)
	}
	binary.LittleEndian.PutUint64(cliBuf.Bytes(), 7)
	if err := c.cli.SendWithImm(cliBuf, 0, 8, rpma.Always, 1234, 2); err != nil {
		t.Fatal(err)
	}
	cq, isRCQ, err := c.srv.Wait(tctx(t))
	if err != nil || !isRCQ || cq != c.srv.RCQ() {
		t.Fatalf("Conn.Wait: %v %v %v", cq, isRCQ, err)
	}
	comp, err := cq.GetCompletion()
	if err != nil {
		t.Fatal(err)
	}
	if comp.Op != rpma.OpRecv || comp.Imm != 1234 || comp.ByteLen != 8 || comp.OpContext != 1 ||
		binary.LittleEndian.Uint64(srvBuf.Bytes()) != 7 {
		t.Fatalf("receive with imm: %+v", comp)
	}
	if wc := waitWC(t, c.cli.CQ()); wc.Opcode != verbs.WCSend || wc.Flags&verbs.WCWithImm == 0 {
		t.Fatalf("sender completion %+v", wc)
	}
	// Write with immediate consumes a receive; Imm() gives host order.
	remote, _ := rpma.RemoteMRFromDescriptor(c.cli.PrivateData())
	if err := c.srv.Recv(srvBuf, 512, 8, 3); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(cliBuf.Bytes()[100:], 4321)
	if err := c.cli.WriteWithImm(remote, 1000, cliBuf, 100, 4, rpma.Always, 4321, 4); err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, c.srv.RCQ())
	if wc.Opcode != verbs.WCRecvRDMAWithImm || wc.Imm() != 4321 || wc.ByteLen != 4 ||
		binary.LittleEndian.Uint32(srvBuf.Bytes()[1000:]) != 4321 {
		t.Fatalf("write with imm %+v", wc)
	}
	waitWC(t, c.cli.CQ())
	// An empty message.
	if err := c.srv.Recv(nil, 0, 0, 8); err != nil {
		t.Fatal(err)
	}
	if err := c.cli.Send(nil, 0, 0, rpma.Always, 9); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, c.srv.RCQ()); wc.ByteLen != 0 || wc.WRID != 8 {
		t.Fatalf("empty message %+v", wc)
	}
	waitWC(t, c.cli.CQ())
}

// Several connections receive from one SRQ; completions name the QP.
func TestSRQConnections(t *testing.T) {
	p := newPeer(t)
	s, err := p.NewSRQ(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	buf := alloc(t, p, 4096, rpma.UsageRecv)
	for i := 0; i < 8; i++ {
		if err := s.Recv(buf, uint64(i*64), 64, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rpma.NewConnCfg()
	cfg.SRQ = s
	c1 := connect(t, p, cfg, nil, nil, nil, nil, nil)
	c2 := connect(t, p, cfg, nil, nil, nil, nil, nil)
	sendBuf := alloc(t, p, 64, rpma.UsageSend)
	for i, c := range []pair{c1, c2, c1} {
		binary.LittleEndian.PutUint64(sendBuf.Bytes(), uint64(10+i))
		if err := c.cli.Send(sendBuf, 0, 8, rpma.Always, 0); err != nil {
			t.Fatal(err)
		}
		waitWC(t, c.cli.CQ())
	}
	counts := map[uint32]int{}
	for i := 0; i < 3; i++ {
		wc := waitWC(t, s.RCQ())
		if wc.Status != verbs.WCSuccess || wc.WRID >= 8 {
			t.Fatalf("SRQ completion %+v", wc)
		}
		counts[wc.QPNum]++
	}
	if counts[c1.srv.QPNum()] != 2 || counts[c2.srv.QPNum()] != 1 {
		t.Fatalf("per-QP receives %v (QPs %d, %d)", counts, c1.srv.QPNum(), c2.srv.QPNum())
	}
	bad := rpma.NewConnCfg()
	bad.SRQ, bad.SharedChannel = s, true
	if _, err := p.NewConnReq(tctx(t), testutil.Addr(t), "9", bad); !errors.Is(err, rpma.ErrInval) {
		t.Errorf("shared channel with an SRQ's own RCQ: %v", err)
	}
}

func TestHotPathAllocs(t *testing.T) {
	p := newPeer(t)
	srvBuf := alloc(t, p, 1<<20, rpma.UsageRecv|rpma.UsageWriteDst|rpma.UsageReadSrc)
	cliBuf := alloc(t, p, 4096, rpma.UsageSend|rpma.UsageWriteSrc|rpma.UsageReadDst)
	cfg := rpma.NewConnCfg()
	cfg.CQSize, cfg.SQSize, cfg.RQSize = 1024, 512, 512
	c := connect(t, p, cfg, cfg, srvBuf.Descriptor(), nil, nil, nil)
	remote, _ := rpma.RemoteMRFromDescriptor(c.cli.PrivateData())
	wc := make([]verbs.WorkCompletion, 1)
	drain := func(cq *rpma.CQ) {
		for {
			if _, err := cq.GetWC(wc); err == nil {
				return
			}
		}
	}
	for name, f := range map[string]func(){
		"Write": func() { c.cli.Write(remote, 0, cliBuf, 0, 64, rpma.Always, 1); drain(c.cli.CQ()) },
		"Read":  func() { c.cli.Read(cliBuf, 0, remote, 0, 64, rpma.Always, 2); drain(c.cli.CQ()) },
		"Recv+Send": func() {
			c.srv.Recv(srvBuf, 0, 64, 3)
			c.cli.Send(cliBuf, 0, 8, rpma.Always, 4)
			drain(c.cli.CQ())
			drain(c.srv.CQ())
		},
	} {
		f()
		if n := testing.AllocsPerRun(50, f); n != 0 {
			t.Errorf("%s: %v allocations per operation", name, n)
		}
	}
}

// A message posted right before Disconnect reaches the peer. rxe on 6.1
// sends in the post's doorbell; on 6.12 it only schedules its sender
// there, and a QP moved to ERR before the sender ran flushed the message
// instead (librpma's 08 example hung that way, C and Go alike), unless
// Disconnect waits for it to leave. Each round has a fresh connection,
// because the race is lost or won once per disconnect.
func TestSendThenDisconnectDelivers(t *testing.T) {
	p := newPeer(t)
	srvBuf := alloc(t, p, 4096, rpma.UsageRecv)
	cliBuf := alloc(t, p, 4096, rpma.UsageSend)
	for round := range 10 {
		c := connect(t, p, nil, nil, nil, nil,
			func(r *rpma.ConnReq) {
				if err := r.Recv(srvBuf, 0, 8, 77); err != nil {
					t.Error(err)
				}
			}, nil)
		binary.LittleEndian.PutUint64(cliBuf.Bytes(), uint64(round)+1000)
		// Unsignaled, as 08's last message: only the peer can tell.
		if err := c.cli.Send(cliBuf, 0, 8, rpma.OnError, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.cli.Disconnect(); err != nil {
			t.Fatal(err)
		}
		// A flushed message never comes: the context bounds the failure.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wc [1]verbs.WorkCompletion
		for {
			n, err := c.srv.CQ().GetWC(wc[:])
			if err == nil && n == 1 {
				break
			}
			if !errors.Is(err, rpma.ErrNoCompletion) {
				t.Fatal(err)
			}
			if err := c.srv.CQ().Wait(ctx); err != nil {
				t.Fatalf("round %d: the message sent before Disconnect never arrived: %v", round, err)
			}
		}
		cancel()
		if wc[0].Status != verbs.WCSuccess || wc[0].WRID != 77 ||
			binary.LittleEndian.Uint64(srvBuf.Bytes()) != uint64(round)+1000 {
			t.Fatalf("round %d: %+v", round, wc[0])
		}
		if err := c.srv.Disconnect(); err != nil {
			t.Fatal(err)
		}
		for _, conn := range []*rpma.Conn{c.cli, c.srv} {
			if ev, err := conn.NextEvent(tctx(t)); err != nil || ev != rpma.ConnClosed {
				t.Fatalf("round %d: %v %v", round, ev, err)
			}
		}
	}
}

// Native flush (librpma 1.3's, opt-in): where the device reports both
// placement types (6.12), a peer that called UseNativeFlush flushes with
// RDMA FLUSH; its regions stay readable for peers that emulate the flush;
// a native flush of a region registered without flush access (as librpma
// 1.2 registers) fails at the target. Without the capability (6.1)
// UseNativeFlush is refused and nothing changes.
func TestNativeFlush(t *testing.T) {
	native := newPeer(t)
	caps, err := native.Context().CapFlags()
	if err != nil {
		t.Fatal(err)
	}
	capable := caps&verbs.DeviceCapFlushGlobal != 0 && caps&verbs.DeviceCapFlushPersistent != 0
	if native.NativeFlush() != capable {
		t.Fatalf("NativeFlush %v with capability flags %#x", native.NativeFlush(), caps)
	}
	err = native.UseNativeFlush()
	if !capable {
		if !errors.Is(err, rpma.ErrNotSupported) || !errors.Is(err, verbs.ErrNotCapable) {
			t.Fatalf("UseNativeFlush without the capability: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	emul := newPeer(t) // same device, librpma 1.2's behaviour
	usage := rpma.UsageWriteDst | rpma.UsageReadSrc | rpma.UsageFlushVisibility
	nativeMR := alloc(t, native, 4096, usage)
	emulMR := alloc(t, emul, 4096, usage)
	src := alloc(t, native, 4096, rpma.UsageWriteSrc|rpma.UsageReadDst)
	emulSrc := alloc(t, emul, 4096, rpma.UsageWriteSrc|rpma.UsageReadDst)
	copy(src.Bytes(), "native flush")
	copy(emulSrc.Bytes(), "emulated flush")

	flush := func(cli *rpma.Conn, local *rpma.LocalMR, target *rpma.LocalMR, n uint64) verbs.WorkCompletion {
		t.Helper()
		remote, err := rpma.RemoteMRFromDescriptor(target.Descriptor())
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.Write(remote, 64, local, 0, n, rpma.OnError, 0); err != nil {
			t.Fatal(err)
		}
		if err := cli.Flush(remote, 64, n, rpma.FlushVisibility, rpma.Always, 0xF01D); err != nil {
			t.Fatal(err)
		}
		return waitWC(t, cli.CQ())
	}
	// Native requester, native target: an RDMA FLUSH, after which the
	// data is there.
	c := connect(t, native, nil, nil, nil, nil, nil, nil)
	if wc := flush(c.cli, src, nativeMR, 12); wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCFlush || wc.WRID != 0xF01D {
		t.Fatalf("native flush: %+v", wc)
	}
	if string(nativeMR.Bytes()[64:76]) != "native flush" {
		t.Fatalf("target holds %q", nativeMR.Bytes()[64:76])
	}
	// Emulating requester, native target (the server side, whose PD the
	// region is in): the 8-byte READ still works.
	ce := connectPeers(t, native, emul, nil, nil, nil, nil, nil, nil)
	if wc := flush(ce.cli, emulSrc, nativeMR, 14); wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMARead || wc.ByteLen != 8 {
		t.Fatalf("emulated flush of a native region: %+v", wc)
	}
	if string(nativeMR.Bytes()[64:78]) != "emulated flush" {
		t.Fatalf("target holds %q", nativeMR.Bytes()[64:78])
	}
	// Native requester, target registered as librpma 1.2 does (remote
	// read, no flush access): the target refuses the FLUSH.
	cn := connectPeers(t, emul, native, nil, nil, nil, nil, nil, nil)
	if wc := flush(cn.cli, src, emulMR, 12); wc.Status != verbs.WCRemAccessErr || wc.WRID != 0xF01D {
		t.Fatalf("native flush of a region without flush access: %+v, want a remote access error", wc)
	}
}

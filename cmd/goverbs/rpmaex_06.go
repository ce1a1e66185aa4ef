package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// 06-multiple-connections, 06scch-multiple-connections: up to 10 clients
// at a time each expose their name (a 32-byte READ_SRC region, its
// descriptor in common_data as the connection request's private data);
// the server reads each name into its slot of one region, prints it and
// disconnects. The server ends after 15 s without any event. The C server
// multiplexes everything with epoll; here a goroutine waits for each
// source of events (the endpoint, each connection's events and its
// completions) and every event restarts the idle timer. 06scch waits for
// completions on a completion channel shared by the connection's CQs.

const (
	rpx06NameSize  = 32
	rpx06ClientMax = 10
	rpx06Idle      = 15 * time.Second // TIMEOUT_15S
)

var rpx06Names = [...]string{"Andy", "Chet", "Derek", "Janek", "Kacper", "Lukasz", "Oksana", "Pawel",
	"Piotr", "Tomasz", "Xiang", "Xiaoran", "Xiaoyan"}

// rpxGlibcRand returns glibc's rand() after srand(seed): the additive
// feedback generator of random(3) with its default 128-byte state (TYPE_3:
// x[i] = x[i-3] + x[i-31], the first 310 outputs discarded, each output
// shifted right by one), so that a seed names the same person as the C
// client.
func rpxGlibcRand(seed uint32) func() int32 {
	if seed == 0 {
		seed = 1
	}
	r := make([]uint32, 0, 400)
	r = append(r, seed)
	for i := 1; i < 31; i++ {
		word := int64(int32(r[i-1]))
		hi, lo := word/127773, word%127773
		word = 16807*lo - 2836*hi
		if word < 0 {
			word += 2147483647
		}
		r = append(r, uint32(int32(word)))
	}
	for i := 31; i < 34; i++ {
		r = append(r, r[i-31])
	}
	next := func() uint32 {
		n := len(r)
		v := r[n-31] + r[n-3]
		r = append(r[1:], v) // keep the last 34 values; the window slides
		return v
	}
	for range 310 {
		next()
	}
	return func() int32 { return int32(next() >> 1) }
}

func rpx06Client(e *rpxEnv) error {
	seed, ok := rpxStrtoul(e.args[0])
	if !ok {
		e.eprintf("strtoul(seed) overflowed\n")
		return rpxExit(-1)
	}
	peer, err := e.clientPeer()
	if err != nil {
		return err
	}
	buf, err := e.mem(rpx06NameSize)
	if err != nil {
		return err
	}
	rnd := rpxGlibcRand(uint32(seed % 0xFFFFFFFF))
	name := rpx06Names[uint64(rnd())%uint64(len(rpx06Names))]
	rpxStrncpy(buf[:rpx06NameSize-1], name)
	buf[rpx06NameSize-1] = 0
	e.printf("My names is: %s\n", rpxCString(buf))
	m, err := e.reg(peer, buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := rpxCommonData{mrDescSize: rpma.DescriptorSize}
	copy(data.descriptors[:], m.Descriptor())
	conn, err := e.clientConnect(peer, nil, data.bytes())
	if err != nil {
		return err
	}
	// The server reads the name, then disconnects.
	return e.waitCloseAndDisconnect(conn)
}

// rpx06Srv is the server's state.
type rpx06Srv struct {
	e      *rpxEnv
	scch   bool
	dst    []byte
	dstMR  *rpma.LocalMR
	ctx    context.Context // ends when the server does
	wg     sync.WaitGroup
	active chan struct{} // an event happened

	mu    sync.Mutex
	slots [rpx06ClientMax]*rpma.Conn
}

// event restarts the idle timer.
func (s *rpx06Srv) event() {
	select {
	case s.active <- struct{}{}:
	default:
	}
}

func rpx06Server(e *rpxEnv, scch bool) error {
	peer, err := e.serverPeer()
	if err != nil {
		return err
	}
	s := &rpx06Srv{e: e, scch: scch, active: make(chan struct{}, 1)}
	if s.dst, err = e.mem(rpx06NameSize * rpx06ClientMax); err != nil {
		return err
	}
	if s.dstMR, err = e.reg(peer, s.dst, rpma.UsageReadDst); err != nil {
		return err
	}
	var cfg *rpma.ConnCfg
	if scch {
		cfg = rpma.NewConnCfg()
		cfg.SharedChannel = true
	}
	ep, err := e.listen(peer)
	if err != nil {
		return err
	}
	e.printf("Today I have got in touch with:\n")

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	s.ctx = ctx
	s.wg.Add(1)
	go s.incoming(ep, cfg)

	idle := time.NewTimer(rpx06Idle)
	defer idle.Stop()
	timedOut := false
	for !timedOut {
		select {
		case <-s.active:
			idle.Reset(rpx06Idle)
		case <-idle.C:
			timedOut = true
		case <-e.ctx.Done():
			timedOut = true
		}
	}
	cancel()
	s.wg.Wait()
	for i, conn := range s.slots {
		if conn != nil {
			conn.Disconnect()
			conn.Close()
			s.slots[i] = nil
		}
	}
	if e.ctx.Err() != nil {
		return e.ctx.Err()
	}
	e.eprintf("Server timed out.\n")
	return nil
}

// incoming takes the connection requests (server_handle_incoming_client).
func (s *rpx06Srv) incoming(ep *rpma.Endpoint, cfg *rpma.ConnCfg) {
	defer s.wg.Done()
	for {
		req, err := ep.NextConnReq(s.ctx, cfg)
		if s.ctx.Err() != nil {
			if err == nil {
				req.Close()
			}
			return
		}
		s.event()
		if err != nil {
			s.e.fail("rpma_ep_next_conn_req", err)
			continue
		}
		s.mu.Lock()
		slot := -1
		for i, c := range s.slots {
			if c == nil {
				slot = i
				break
			}
		}
		s.mu.Unlock()
		if slot < 0 {
			req.Close() // no room: rejected
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, rpxOpTimeout)
		conn, err := req.Connect(ctx, nil)
		cancel()
		if err != nil {
			continue // the slot stays free
		}
		s.mu.Lock()
		s.slots[slot] = conn
		s.mu.Unlock()
		s.wg.Add(1)
		go s.client(slot, conn)
	}
}

// client handles the events of the connection in a slot
// (client_handle_connection_event).
func (s *rpx06Srv) client(slot int, conn *rpma.Conn) {
	defer s.wg.Done()
	cctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var cmpl sync.WaitGroup
	failures := 0
	for {
		ev, err := conn.NextEvent(s.ctx)
		if s.ctx.Err() != nil {
			cancel()
			cmpl.Wait()
			return // the server ends and deletes the connection
		}
		s.event()
		if err != nil {
			conn.Disconnect()
			if failures++; failures < 2 {
				continue
			}
			ev = rpma.ConnLost
		}
		if ev == rpma.ConnEstablished {
			if err := s.fetchName(slot, conn); err != nil {
				conn.Disconnect()
				continue
			}
			cmpl.Add(1)
			go func() {
				defer cmpl.Done()
				s.completion(cctx, slot, conn)
			}()
			continue
		}
		// CLOSED, or anything else: the connection is done.
		cancel()
		cmpl.Wait()
		s.mu.Lock()
		s.slots[slot] = nil
		s.mu.Unlock()
		conn.Close()
		return
	}
}

// fetchName starts reading the client's name into its slot
// (client_fetch_name).
func (s *rpx06Srv) fetchName(slot int, conn *rpma.Conn) error {
	pd := conn.PrivateData()
	data, ok := rpxCommonDataOf(pd)
	if !ok {
		s.e.eprintf("[%d] received connection's private data is too small (%d < %d)\n", slot, len(pd), rpxCommonDataSize)
		return rpxFailed
	}
	src, err := rpma.RemoteMRFromDescriptor(data.mrDesc())
	if err != nil {
		return err
	}
	return conn.Read(s.dstMR, uint64(slot*rpx06NameSize), src, 0, rpx06NameSize, rpma.Always, 0)
}

// completion waits for the read of the name, prints it and disconnects
// (client_handle_completion).
func (s *rpx06Srv) completion(ctx context.Context, slot int, conn *rpma.Conn) {
	var wc [1]verbs.WorkCompletion
	for {
		cq := conn.CQ()
		var err error
		if s.scch {
			cq, _, err = conn.Wait(ctx)
		} else {
			err = cq.Wait(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		s.event()
		if err != nil {
			conn.Disconnect()
			return
		}
		if _, err := cq.GetWC(wc[:]); err != nil {
			if errors.Is(err, rpma.ErrNoCompletion) {
				continue // nothing yet
			}
			conn.Disconnect()
			return
		}
		switch {
		case wc[0].Status != verbs.WCSuccess:
			s.e.eprintf("[%d] rpma_read() failed: %s\n", slot, wc[0].Status)
		case wc[0].Opcode != verbs.WCRDMARead:
			s.e.eprintf("[%d] received unexpected wc.opcode value (%d != %d)\n", slot, wc[0].Opcode, verbs.WCRDMARead)
		default:
			s.e.printf("- %s\n", rpxCString(s.dst[slot*rpx06NameSize:(slot+1)*rpx06NameSize]))
		}
		conn.Disconnect()
		return
	}
}

// Command 06scch-multiple-connections is librpma's example 06scch-multiple-connections in Go.
//
// 06-multiple-connections with a completion channel shared by each
// connection's CQs: up to 10 clients at a time each expose their name (a
// 32-byte READ_SRC region, its descriptor in common_data as the connection
// request's private data); the server reads each name into its slot of
// one region, prints it and disconnects. The server ends after 15 s
// without any event. The C server multiplexes everything with epoll; here
// a goroutine waits for each source of events (the endpoint, each
// connection's events and its completions) and every event restarts the
// idle timer.
//
//	06scch-multiple-connections server <server_address> <port>
//	06scch-multiple-connections client <server_address> <port> <seed>
package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/goverbs/goverbs/examples/rpma/internal/common"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// example is this program for common.Main.
var example = common.Example{Name: "06scch-multiple-connections", Server: server, Client: client, ClientArgs: "<seed>", ClientNeeds: 1}

func main() { common.Main(example) }

const (
	nameSize    = 32
	clientMax   = 10
	idleTimeout = 15 * time.Second // TIMEOUT_15S
)

var names = [...]string{"Andy", "Chet", "Derek", "Janek", "Kacper", "Lukasz", "Oksana", "Pawel",
	"Piotr", "Tomasz", "Xiang", "Xiaoran", "Xiaoyan"}

func client(e *common.Env) error {
	seed, ok := common.Strtoul(e.Args[0])
	if !ok {
		e.Eprintf("strtoul(seed) overflowed\n")
		return common.Exit(-1)
	}
	peer, err := e.ClientPeer()
	if err != nil {
		return err
	}
	buf, err := e.Mem(nameSize)
	if err != nil {
		return err
	}
	rnd := common.GlibcRand(uint32(seed % 0xFFFFFFFF))
	name := names[uint64(rnd())%uint64(len(names))]
	common.Strncpy(buf[:nameSize-1], name)
	buf[nameSize-1] = 0
	e.Printf("My names is: %s\n", common.CString(buf))
	m, err := e.Reg(peer, buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	data := common.CommonData{MRDescSize: rpma.DescriptorSize}
	copy(data.Descriptors[:], m.Descriptor())
	conn, err := e.ClientConnect(peer, nil, data.Bytes())
	if err != nil {
		return err
	}
	// The server reads the name, then disconnects.
	return e.WaitCloseAndDisconnect(conn)
}

// serverState is the server's state.
type serverState struct {
	e      *common.Env
	dst    []byte
	dstMR  *rpma.LocalMR
	ctx    context.Context // ends when the server does
	wg     sync.WaitGroup
	active chan struct{} // an event happened

	mu    sync.Mutex
	slots [clientMax]*rpma.Conn
}

// event restarts the idle timer.
func (s *serverState) event() {
	select {
	case s.active <- struct{}{}:
	default:
	}
}

func server(e *common.Env) error {
	peer, err := e.ServerPeer()
	if err != nil {
		return err
	}
	s := &serverState{e: e, active: make(chan struct{}, 1)}
	if s.dst, err = e.Mem(nameSize * clientMax); err != nil {
		return err
	}
	if s.dstMR, err = e.Reg(peer, s.dst, rpma.UsageReadDst); err != nil {
		return err
	}
	cfg := rpma.NewConnCfg()
	cfg.SharedChannel = true
	ep, err := e.Listen(peer)
	if err != nil {
		return err
	}
	e.Printf("Today I have got in touch with:\n")

	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	s.ctx = ctx
	s.wg.Add(1)
	go s.incoming(ep, cfg)

	idle := time.NewTimer(idleTimeout)
	defer idle.Stop()
	timedOut := false
	for !timedOut {
		select {
		case <-s.active:
			idle.Reset(idleTimeout)
		case <-idle.C:
			timedOut = true
		case <-e.Ctx.Done():
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
	if e.Ctx.Err() != nil {
		return e.Ctx.Err()
	}
	e.Eprintf("Server timed out.\n")
	return nil
}

// incoming takes the connection requests (server_handle_incoming_client).
func (s *serverState) incoming(ep *rpma.Endpoint, cfg *rpma.ConnCfg) {
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
			s.e.Fail("rpma_ep_next_conn_req", err)
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
		ctx, cancel := context.WithTimeout(s.ctx, common.OpTimeout)
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
func (s *serverState) client(slot int, conn *rpma.Conn) {
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
func (s *serverState) fetchName(slot int, conn *rpma.Conn) error {
	pd := conn.PrivateData()
	data, ok := common.CommonDataOf(pd)
	if !ok {
		s.e.Eprintf("[%d] received connection's private data is too small (%d < %d)\n", slot, len(pd), common.CommonDataSize)
		return common.ErrFailed
	}
	src, err := rpma.RemoteMRFromDescriptor(data.MRDesc())
	if err != nil {
		return err
	}
	return conn.Read(s.dstMR, uint64(slot*nameSize), src, 0, nameSize, rpma.Always, 0)
}

// completion waits for the read of the name, prints it and disconnects
// (client_handle_completion).
func (s *serverState) completion(ctx context.Context, slot int, conn *rpma.Conn) {
	var wc [1]verbs.WorkCompletion
	for {
		cq, _, err := conn.Wait(ctx)
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
			s.e.Eprintf("[%d] rpma_read() failed: %s\n", slot, wc[0].Status)
		case wc[0].Opcode != verbs.WCRDMARead:
			s.e.Eprintf("[%d] received unexpected wc.opcode value (%d != %d)\n", slot, wc[0].Opcode, verbs.WCRDMARead)
		default:
			s.e.Printf("- %s\n", common.CString(s.dst[slot*nameSize:(slot+1)*nameSize]))
		}
		conn.Disconnect()
		return
	}
}

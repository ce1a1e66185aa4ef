package cm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Queues is what librdmacm's rdma_create_ep and rdma_create_qp set up
// for an ID when no CQs are given: a QP whose sends and receives complete
// on two separate CQs, each with its own completion channel, and the
// rdma_verbs.h conveniences on top (post a buffer of a registered region,
// get one completion, blocking). The name says what it is: the queues of
// one connection (a qp.QP, its send and receive cq.CQ), in one value.
// Memory registered with NewMR is deregistered by Close; see NewQueues.
type Queues struct {
	id     *ID
	pd     *verbs.PD
	ownPD  bool
	sendCh *verbs.CompChannel
	recvCh *verbs.CompChannel
	sendCQ *cq.CQ
	recvCQ *cq.CQ
	qp     *qp.QP

	mrMu sync.Mutex
	mrs  []*mr.MR // NewMR's, closed by Close

	// Scratch space of the post and get helpers, one set per direction,
	// so they allocate nothing and are safe for concurrent use.
	sendMu   sync.Mutex
	sendWR   [1]verbs.SendWR
	sendSGE  [1]verbs.SGE
	recvMu   sync.Mutex
	recvWR   [1]verbs.RecvWR
	recvSGE  [1]verbs.SGE
	sendWCMu sync.Mutex
	sendWC   [1]verbs.WorkCompletion
	recvWCMu sync.Mutex
	recvWC   [1]verbs.WorkCompletion
}

// NewQueues creates the ID's PD (when pd is nil), its send and receive
// CQs with their channels, and its QP with caps, and moves the QP to INIT.
// The ID must be bound to a device (after ResolveAddr, or from
// GetRequest). Queues.Close destroys all of it (the QP included, a PD
// it was given excepted) and leaves the ID open; closing the ID destroys
// the QP only, unless it was the last ID on a device context cm opened,
// which closes with everything on it.
//
// Register the connection's memory with Queues.NewMR: Close deregisters
// those regions too. A region registered on PD() any other way (mr.New,
// mr.Register) is the caller's to close, before Close: the kernel does
// not deallocate a PD that still has regions, so Close then fails
// (errors.Is(err, unix.EBUSY)) and the PD stays until Close is called
// again after them. A server that makes Queues per connection and
// registers with NewMR leaves nothing behind when it closes each.
func (id *ID) NewQueues(pd *verbs.PD, caps qp.Caps) (*Queues, error) {
	dev := id.Context()
	if dev == nil {
		return nil, errors.New("cm: queues: the ID is not bound to a device yet")
	}
	e := &Queues{id: id, pd: pd}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	var err error
	if e.pd == nil {
		if e.pd, err = dev.AllocPD(); err != nil {
			return nil, err
		}
		e.ownPD = true
	}
	if e.sendCh, err = dev.NewCompChannel(); err != nil {
		return nil, err
	}
	if e.recvCh, err = dev.NewCompChannel(); err != nil {
		return nil, err
	}
	if e.sendCQ, err = cq.New(dev, cq.Options{CQE: max(caps.MaxSendWR, 1), Channel: e.sendCh}); err != nil {
		return nil, err
	}
	if e.recvCQ, err = cq.New(dev, cq.Options{CQE: max(caps.MaxRecvWR, 1), Channel: e.recvCh}); err != nil {
		return nil, err
	}
	if e.qp, err = id.CreateQP(e.pd, qp.Options{SendCQ: e.sendCQ, RecvCQ: e.recvCQ, Caps: caps}); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// ID returns the ID the queues belong to.
func (e *Queues) ID() *ID { return e.id }

// PD returns the queues' protection domain.
func (e *Queues) PD() *verbs.PD { return e.pd }

// QP returns the queue pair.
func (e *Queues) QP() *qp.QP { return e.qp }

// SendCQ returns the CQ of send, RDMA and atomic completions.
func (e *Queues) SendCQ() *cq.CQ { return e.sendCQ }

// RecvCQ returns the CQ of receive completions.
func (e *Queues) RecvCQ() *cq.CQ { return e.recvCQ }

// sgeFor checks that buf lies inside m and returns its SGE.
func sgeFor(buf []byte, m *mr.MR) (verbs.SGE, error) {
	if m == nil {
		return verbs.SGE{}, errors.New("cm: no memory region")
	}
	mem := m.Bytes()
	if len(mem) == 0 {
		return verbs.SGE{}, verbs.ErrClosed
	}
	if len(buf) == 0 {
		return verbs.SGE{LKey: m.LKey(), Addr: m.IOVA()}, nil
	}
	start := uintptr(unsafe.Pointer(&mem[0]))
	p := uintptr(unsafe.Pointer(&buf[0]))
	if p < start || p+uintptr(len(buf)) > start+uintptr(len(mem)) {
		return verbs.SGE{}, errors.New("cm: buffer is not inside the memory region")
	}
	return verbs.SGE{Addr: m.IOVA() + uint64(p-start), Length: uint32(len(buf)), LKey: m.LKey()}, nil
}

// PostRecv posts buf, which must lie inside m, as a receive buffer
// (rdma_post_recv). wrID comes back in the completion.
func (e *Queues) PostRecv(wrID uint64, buf []byte, m *mr.MR) error {
	sge, err := sgeFor(buf, m)
	if err != nil {
		return err
	}
	e.recvMu.Lock()
	defer e.recvMu.Unlock()
	e.recvSGE[0] = sge
	e.recvWR[0] = verbs.RecvWR{WRID: wrID, SGList: e.recvSGE[:]}
	return e.qp.PostRecv(e.recvWR[:])
}

func (e *Queues) post(wr verbs.SendWR, buf []byte, m *mr.MR) error {
	e.sendMu.Lock()
	defer e.sendMu.Unlock()
	if m != nil || len(buf) > 0 {
		sge, err := sgeFor(buf, m)
		if err != nil {
			return err
		}
		e.sendSGE[0] = sge
		wr.SGList = e.sendSGE[:]
	}
	e.sendWR[0] = wr
	return e.qp.PostSend(e.sendWR[:])
}

// PostSend sends buf (inside m; with m nil and verbs.SendInline in flags,
// buf is sent inline) (rdma_post_send).
func (e *Queues) PostSend(wrID uint64, buf []byte, m *mr.MR, flags verbs.SendFlags) error {
	if m == nil && flags&verbs.SendInline != 0 {
		return e.post(verbs.SendWR{WRID: wrID, Opcode: verbs.WRSend, Flags: flags, InlineData: buf}, nil, nil)
	}
	return e.post(verbs.SendWR{WRID: wrID, Opcode: verbs.WRSend, Flags: flags}, buf, m)
}

// PostRead reads len(buf) bytes at the peer's remoteAddr (rkey) into buf,
// which lies inside m (rdma_post_read).
func (e *Queues) PostRead(wrID uint64, buf []byte, m *mr.MR, flags verbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	return e.post(verbs.SendWR{WRID: wrID, Opcode: verbs.WRRDMARead, Flags: flags, RemoteAddr: remoteAddr, RKey: rkey}, buf, m)
}

// PostWrite writes buf (inside m) to the peer's remoteAddr (rkey)
// (rdma_post_write).
func (e *Queues) PostWrite(wrID uint64, buf []byte, m *mr.MR, flags verbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	if m == nil && flags&verbs.SendInline != 0 {
		return e.post(verbs.SendWR{WRID: wrID, Opcode: verbs.WRRDMAWrite, Flags: flags, InlineData: buf, RemoteAddr: remoteAddr, RKey: rkey}, nil, nil)
	}
	return e.post(verbs.SendWR{WRID: wrID, Opcode: verbs.WRRDMAWrite, Flags: flags, RemoteAddr: remoteAddr, RKey: rkey}, buf, m)
}

// getComp implements rdma_get_{send,recv}_comp: poll; if empty, arm the CQ,
// poll again (a completion may have slipped in before arming), then wait
// on the channel, and repeat. Arm-then-repoll is what makes a wake-up
// impossible to lose.
func getComp(ctx context.Context, c *cq.CQ, mu *sync.Mutex, wc *[1]verbs.WorkCompletion) (verbs.WorkCompletion, error) {
	mu.Lock()
	defer mu.Unlock()
	for {
		n, err := c.Poll(wc[:])
		if err != nil {
			return verbs.WorkCompletion{}, err
		}
		if n == 1 {
			return wc[0], wc[0].Err()
		}
		if err := c.Wait(ctx); err != nil {
			return verbs.WorkCompletion{}, err
		}
	}
}

// GetRecvComp returns the next receive completion, blocking until one
// arrives or ctx ends (rdma_get_recv_comp). As cq.CQ.Next, it returns a
// completion that failed together with its error (a *verbs.WCError from
// WorkCompletion.Err, errors.As finds it): one check of the error covers
// the wait and the completion's status.
func (e *Queues) GetRecvComp(ctx context.Context) (verbs.WorkCompletion, error) {
	return getComp(ctx, e.recvCQ, &e.recvWCMu, &e.recvWC)
}

// GetSendComp returns the next send-side completion (SEND, RDMA READ and
// WRITE, atomics), blocking until one arrives or ctx ends
// (rdma_get_send_comp). As GetRecvComp, it returns a completion that
// failed together with its error, a *verbs.WCError.
func (e *Queues) GetSendComp(ctx context.Context) (verbs.WorkCompletion, error) {
	return getComp(ctx, e.sendCQ, &e.sendWCMu, &e.sendWC)
}

// NewMR allocates size bytes off the Go heap and registers them with
// access on the queues' PD, as mr.New does; Close deregisters the region
// (after the QP is gone) and frees the memory. Closing the region earlier
// is allowed.
func (e *Queues) NewMR(size int, access mr.Access) (*mr.MR, error) {
	m, err := mr.New(e.pd, size, access)
	if err != nil {
		return nil, err
	}
	e.mrMu.Lock()
	e.mrs = append(e.mrs, m)
	e.mrMu.Unlock()
	return m, nil
}

// Close destroys the QP, deregisters the regions NewMR made, destroys
// the CQs and the channels and, if NewQueues allocated it, the PD. The ID
// stays open. See NewQueues for regions registered otherwise: a Close
// that failed on the PD can be called again once they are closed.
func (e *Queues) Close() error {
	var errs []error
	if e.qp != nil {
		errs = append(errs, e.qp.Close())
	}
	e.mrMu.Lock()
	mrs := e.mrs
	e.mrs = nil
	e.mrMu.Unlock()
	for _, m := range mrs {
		errs = append(errs, m.Close())
	}
	for _, c := range []*cq.CQ{e.sendCQ, e.recvCQ} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	for _, ch := range []*verbs.CompChannel{e.sendCh, e.recvCh} {
		if ch != nil {
			errs = append(errs, ch.Close())
		}
	}
	if e.ownPD {
		if err := e.pd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cm: queues PD (close the MRs registered on it first): %w", err))
		}
	}
	return errors.Join(errs...)
}

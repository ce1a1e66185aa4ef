package rpma

import (
	"context"
	"errors"
	"sync"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/verbs"
)

// CQ is a completion queue of a connection or SRQ (rpma_cq). It is armed
// at creation and re-armed by every Wait.
type CQ struct {
	cq     *cq.CQ
	ch     *verbs.CompChannel
	shared bool
	ownCh  bool
	life   *life   // the connection's, or nil (an SRQ's CQ)
	wait   waitCtx // Wait's context

	mu sync.Mutex
	wc [1]verbs.WorkCompletion
}

func newCQ(ctx *verbs.Context, size uint32, ch *verbs.CompChannel, shared bool) (*CQ, error) {
	c := &CQ{ch: ch, shared: shared}
	if ch == nil {
		var err error
		if c.ch, err = ctx.NewCompChannel(); err != nil {
			return nil, provider(err)
		}
		c.ownCh = true
	}
	var err error
	c.cq, err = cq.New(ctx, cq.Options{CQE: int(min(max(size, 1), 1<<31-1)), Channel: c.ch})
	if err == nil {
		err = c.cq.ReqNotify(false)
	}
	if err != nil {
		c.close()
		return nil, provider(err)
	}
	return c, nil
}

// CQ returns the underlying verbs completion queue.
func (c *CQ) CQ() *cq.CQ { return c.cq }

// FD returns the fd of the CQ's completion channel (rpma_cq_get_fd); with
// a shared channel, every CQ of the connection has the same one.
func (c *CQ) FD() int { return c.ch.FD() }

// Wait waits for the CQ's next completion event, acknowledges it and
// re-arms the CQ (rpma_cq_wait). A wake-up with nothing to collect is
// normal. It fails with ErrSharedChannel on a shared channel (use
// Conn.Wait), and with ErrNoCompletion when ctx ends the wait.
//
// A connection's CQ ends its waits with the connection, as Conn.Wait
// does: once the connection is over, Wait returns at once, nil if the CQ
// holds completions, else ErrNoCompletion wrapping why the connection
// ended. An SRQ's CQ serves many connections and waits on.
func (c *CQ) Wait(ctx context.Context) error {
	if c == nil {
		return inval("rpma: CQ wait: no CQ")
	}
	if c.shared {
		return ErrSharedChannel
	}
	if !c.life.over() {
		_, err := cq.WaitChannel(c.wait.with(ctx, c.life), c.ch)
		if err != nil && !c.life.over() {
			return wrap(ErrNoCompletion, err)
		}
		if err == nil {
			return c.rearm()
		}
	}
	// The connection is over: what the CQ holds, then the end.
	if !c.cq.Pending() {
		return c.life.err()
	}
	return c.rearm()
}

// rearm arms the CQ for its next completion.
func (c *CQ) rearm() error {
	if err := c.cq.ReqNotify(false); err != nil {
		return provider(err)
	}
	return nil
}

// GetWC polls up to len(wc) completions into wc and returns how many
// (rpma_cq_get_wc). The completions are the device's, untouched: WRID is
// the op context, ImmData is in network byte order (see
// verbs.WorkCompletion.Imm), and on an error status only WRID, Status,
// QPNum and VendorErr are valid. An empty CQ is ErrNoCompletion. It
// allocates nothing.
func (c *CQ) GetWC(wc []verbs.WorkCompletion) (int, error) {
	if c == nil || len(wc) == 0 {
		return 0, ErrInval
	}
	n, err := c.cq.Poll(wc)
	if err != nil {
		return 0, provider(err)
	}
	if n == 0 {
		return 0, ErrNoCompletion
	}
	return n, nil
}

// Op is the operation of a completion in the deprecated Completion form
// (enum rpma_op).
type Op int

// Operations.
const (
	OpRead            Op = 0
	OpWrite           Op = 1
	OpFlush           Op = 2 // never produced: flushes complete as OpRead
	OpSend            Op = 3
	OpRecv            Op = 4
	OpRecvRDMAWithImm Op = 5
)

// Completion is librpma's deprecated completion structure.
type Completion struct {
	OpContext uint64
	Op        Op
	ByteLen   uint32
	OpStatus  verbs.WCStatus
	Flags     uint32
	Imm       uint32 // host byte order
}

// GetCompletion polls one completion and translates it (the deprecated
// rpma_cq_get_completion): READ, WRITE, SEND, RECV and
// RECV_RDMA_WITH_IMM map to their Op; any other opcode is
// ErrNotSupported. When OpStatus is not success only OpContext and
// OpStatus are set. Imm is set (in host order) only for receives that
// carry immediate data.
//
// Deprecated: use GetWC, which returns the device's completions whole, as
// librpma deprecated rpma_cq_get_completion for rpma_cq_get_wc.
func (c *CQ) GetCompletion() (Completion, error) {
	if c == nil {
		return Completion{}, ErrInval
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.GetWC(c.wc[:]); err != nil {
		return Completion{}, err
	}
	return translate(&c.wc[0])
}

// translate is the deprecated opcode table.
func translate(wc *verbs.WorkCompletion) (Completion, error) {
	out := Completion{OpContext: wc.WRID, OpStatus: wc.Status}
	if wc.Status != verbs.WCSuccess {
		return out, nil
	}
	switch wc.Opcode {
	case verbs.WCRDMARead:
		out.Op = OpRead
	case verbs.WCRDMAWrite:
		out.Op = OpWrite
	case verbs.WCSend:
		out.Op = OpSend
	case verbs.WCRecv:
		out.Op = OpRecv
	case verbs.WCRecvRDMAWithImm:
		out.Op = OpRecvRDMAWithImm
	default:
		return out, wrap(ErrNotSupported, errors.New("rpma: completion opcode "+wc.Opcode.String()))
	}
	out.ByteLen = wc.ByteLen
	out.Flags = uint32(wc.Flags)
	if (out.Op == OpRecv || out.Op == OpRecvRDMAWithImm) && wc.Flags&verbs.WCWithImm != 0 {
		out.Imm = wc.Imm()
	}
	return out, nil
}

func (c *CQ) close() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.cq != nil {
		errs = append(errs, c.cq.Close())
	}
	if c.ownCh && c.ch != nil {
		errs = append(errs, c.ch.Close())
	}
	return errors.Join(errs...)
}

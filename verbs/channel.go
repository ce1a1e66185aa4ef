package verbs

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/pollfd"
	"github.com/goverbs/goverbs/uverbs"
)

// CompChannel is a completion channel: an fd on which the kernel queues one
// event each time an armed CQ bound to it gets a completion. Several CQs may
// share a channel. Wait for its events with cq.WaitChannel (or a CQ's
// Wait), which hand each event to its CQ. The fd sits on Go's netpoller;
// FD exposes its number for epoll users.
type CompChannel struct {
	ctx   *Context
	k     kobj.Channel // the fd, and events read but not yet claimed
	track uint64

	mu     sync.Mutex
	closed bool
}

// NewCompChannel creates a completion channel (CREATE_COMP_CHANNEL).
func (c *Context) NewCompChannel() (*CompChannel, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("verbs: create completion channel: %w", err)
	}
	req := uverbs.CreateCompChannel{}
	var resp uverbs.CreateCompChannelResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("CREATE_COMP_CHANNEL", uverbs.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, c.driver())
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if err := c.do(&r); err != nil {
		return nil, err
	}
	fd, err := pollfd.New(int(int32(resp.Fd)), "uverbs-comp-channel")
	if err != nil {
		return nil, fmt.Errorf("verbs: create completion channel: %w", err)
	}
	ch := &CompChannel{ctx: c, k: kobj.Channel{FD: fd}}
	t, err := c.track(kobj.KindCompChannel, ch)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("verbs: create completion channel: %w", err)
	}
	ch.track = t
	return ch, nil
}

// Context returns the context the channel belongs to.
func (ch *CompChannel) Context() *Context { return ch.ctx }

// FD returns the channel's descriptor number, valid until Close, for
// applications that multiplex it with epoll (it is non-blocking and
// readable when an event is queued).
func (ch *CompChannel) FD() int { return ch.k.FD.Int() }

// Close closes the channel. CQs bound to it keep the kernel object alive
// until they are destroyed.
func (ch *CompChannel) Close() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil
	}
	ch.closed = true
	ch.ctx.untrack(ch.track)
	return ch.k.FD.Close()
}

package rpma

import (
	"errors"
	"sync"

	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// SRQCfg configures a shared receive queue (rpma_srq_cfg). The defaults
// are librpma's code's (the man page's 100 is wrong): 20 and 20.
type SRQCfg struct {
	RQSize  uint32 // receive buffers
	RCQSize uint32 // 0: no receive CQ of its own
}

// NewSRQCfg returns the default configuration.
func NewSRQCfg() *SRQCfg { return &SRQCfg{RQSize: 20, RCQSize: 20} }

// SRQ is a shared receive queue (rpma_srq): connections created with it
// in their ConnCfg receive from one pool of buffers, which form an
// unordered set; tell connections apart by the completion's QPNum.
type SRQ struct {
	peer *Peer
	srq  *srq.SRQ
	rcq  *CQ

	mu  sync.Mutex
	wr  [1]verbs.RecvWR
	sge [1]verbs.SGE
}

// NewSRQ creates an SRQ (rpma_srq_new) with cfg (nil: the defaults), and a
// receive CQ when cfg.RCQSize > 0.
func (p *Peer) NewSRQ(cfg *SRQCfg) (*SRQ, error) {
	if p == nil {
		return nil, ErrInval
	}
	if cfg == nil {
		cfg = NewSRQCfg()
	}
	s := &SRQ{peer: p}
	var err error
	if s.srq, err = srq.New(p.pd, srq.Attr{MaxWR: int(max(cfg.RQSize, 1)), MaxSGE: 1}); err != nil {
		return nil, provider(err)
	}
	if cfg.RCQSize > 0 {
		if s.rcq, err = newCQ(p.ctx, cfg.RCQSize, nil, false); err != nil {
			s.srq.Close()
			return nil, err
		}
	}
	return s, nil
}

// RCQ returns the SRQ's receive CQ, or nil when RCQSize was 0.
func (s *SRQ) RCQ() *CQ { return s.rcq }

// Recv posts a receive buffer of len bytes at off in dst, to the shared
// pool (rpma_srq_recv). dst nil requires off and len 0.
func (s *SRQ) Recv(dst *LocalMR, off, length uint64, opContext uint64) error {
	if s == nil {
		return ErrInval
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sgl, err := recvSGE(dst, off, length, &s.sge)
	if err != nil {
		return err
	}
	s.wr[0] = verbs.RecvWR{WRID: opContext, SGList: sgl}
	if err := s.srq.PostRecv(s.wr[:]); err != nil {
		return provider(err)
	}
	return nil
}

// Close destroys the receive CQ and the SRQ (rpma_srq_delete).
func (s *SRQ) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.rcq != nil {
		errs = append(errs, s.rcq.close())
	}
	errs = append(errs, s.srq.Close())
	return wrap(ErrProvider, errors.Join(errs...))
}

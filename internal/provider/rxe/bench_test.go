package rxe

import (
	"testing"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/providertest"
)

// BenchmarkRecvRingPost: one single-WR post into a receive ring in plain
// memory (no device): the user-space cost of PostRecv without the QP
// state check. The "kernel" consumes everything whenever the ring fills.
func BenchmarkRecvRingPost(b *testing.B) {
	mem := fakeQueue(b, 6, 1024)
	q, err := NewQueue(mem, RecvWQEHeader)
	if err != nil {
		b.Fatal(err)
	}
	r := NewRecvRing(q, 1, providertest.Errors())
	wr := []provider.RecvWR{{WRID: 1, SGList: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		if r.Post(wr) != nil {
			*q.cons = *q.prod // consume all
		}
	}
}

// BenchmarkPollCQEmpty: the lock and an empty poll of 16, as CQ.Poll does.
func BenchmarkPollCQEmpty(b *testing.B) {
	q, err := NewQueue(fakeQueue(b, 7, 64), 48)
	if err != nil {
		b.Fatal(err)
	}
	var l provider.Lock
	wc := make([]provider.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		if !l.Lock() {
			b.Fatal("closed")
		}
		PollCQ(q, wc)
		l.Unlock()
	}
}

// BenchmarkWriteSend: encoding one single-SGE 64-byte SEND or RDMA WRITE
// into a send queue slot in plain memory (no device, no doorbell): the
// WQE part of PostSend's user-space cost.
func BenchmarkWriteSend(b *testing.B) {
	for _, tc := range []struct {
		name string
		op   provider.WROpcode
	}{{"SEND", provider.WRSend}, {"RDMA_WRITE", provider.WRRDMAWrite}} {
		op := tc.op
		b.Run(tc.name, func(b *testing.B) {
			q, err := NewQueue(fakeQueue(b, 9, 64), SendWQESize(1, 64))
			if err != nil {
				b.Fatal(err)
			}
			wr := &provider.SendWR{Opcode: op, SGList: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}},
				RemoteAddr: 0x2000, RKey: 2}
			b.ReportAllocs()
			i := uint32(0)
			for b.Loop() {
				WriteSend(q.Elem(i), wr, false, 0, i)
				i++
			}
		})
	}
}

// The same three through the provider seam, as the object packages call
// them: one interface call per post or poll (and, for sends, one per work
// request into the generic checks). Compare with the direct benchmarks
// above for the seam's cost.

// BenchmarkRecvRingPostSeam is BenchmarkRecvRingPost through
// provider.RecvQueue.
func BenchmarkRecvRingPostSeam(b *testing.B) {
	mem := fakeQueue(b, 6, 1024)
	q, err := NewQueue(mem, RecvWQEHeader)
	if err != nil {
		b.Fatal(err)
	}
	var r provider.RecvQueue = NewRecvRing(q, 1, providertest.Errors())
	wr := []provider.RecvWR{{WRID: 1, SGList: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		if r.Post(wr) != nil {
			*q.cons = *q.prod // consume all
		}
	}
}

// BenchmarkPollCQEmptySeam is BenchmarkPollCQEmpty through provider.CQ.
func BenchmarkPollCQEmptySeam(b *testing.B) {
	q, err := NewQueue(fakeQueue(b, 7, 64), 48)
	if err != nil {
		b.Fatal(err)
	}
	var c provider.CQ = &cq{q: q}
	var l provider.Lock
	wc := make([]provider.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		if !l.Lock() {
			b.Fatal("closed")
		}
		c.Poll(wc)
		l.Unlock()
	}
}

// acceptAll is a provider.Checker that accepts every work request, as the
// generic checks do a valid one (their own cost is not measured here).
type acceptAll struct{}

func (acceptAll) CheckSend(int, *provider.SendWR) (provider.AH, error) { return nil, nil }

// BenchmarkSendQueuePostSeam: one single-SGE 64-byte RDMA WRITE posted
// through provider.SendQueue (the checker call, the WQE, the producer
// index; no doorbell): BenchmarkWriteSend's encoding plus the seam's
// calls and the queue bookkeeping.
func BenchmarkSendQueuePostSeam(b *testing.B) {
	q, err := NewQueue(fakeQueue(b, 9, 64), SendWQESize(1, 64))
	if err != nil {
		b.Fatal(err)
	}
	var s provider.SendQueue = &sendQueue{q: q, errs: providertest.Errors()}
	wr := []provider.SendWR{{Opcode: provider.WRRDMAWrite, SGList: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}},
		RemoteAddr: 0x2000, RKey: 2}}
	var check provider.Checker = acceptAll{}
	b.ReportAllocs()
	for b.Loop() {
		if n, _, _ := s.Post(wr, check); n == 0 {
			*q.cons = *q.prod // consume all
		}
	}
}

//go:noinline
func checkDirect(int, *provider.SendWR) (provider.AH, error) { return nil, nil }

// BenchmarkSendQueuePostDirect is BenchmarkSendQueuePostSeam's work as qp
// did it before the seam: the loop in the caller and a direct call for
// the generic checks (qp's validateSend, which is not inlined either), so
// the difference between the two is the seam's two interface calls.
func BenchmarkSendQueuePostDirect(b *testing.B) {
	q, err := NewQueue(fakeQueue(b, 9, 64), SendWQESize(1, 64))
	if err != nil {
		b.Fatal(err)
	}
	s := &sendQueue{q: q, errs: providertest.Errors()}
	wrs := []provider.SendWR{{Opcode: provider.WRRDMAWrite, SGList: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}},
		RemoteAddr: 0x2000, RKey: 2}}
	b.ReportAllocs()
	for b.Loop() {
		free := q.Free()
		p := q.ProducerIndex()
		n := 0
		for i := range wrs {
			if _, err := checkDirect(i, &wrs[i]); err != nil || uint32(i) >= free {
				break
			}
			WriteSend(q.Elem(p), &wrs[i], false, 0, s.ssn)
			s.ssn++
			p = q.Next(p)
			n++
		}
		if n > 0 {
			q.Publish(p)
		} else {
			*q.cons = *q.prod // consume all
		}
	}
}

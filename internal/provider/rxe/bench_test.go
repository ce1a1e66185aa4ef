package rxe

import (
	"testing"

	"github.com/goverbs/goverbs/verbs"
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
	r := NewRecvRing(q, 1, NewErrors("b"))
	wr := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
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
	var l Lock
	wc := make([]verbs.WorkCompletion, 16)
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
	for _, op := range []verbs.WROpcode{verbs.WRSend, verbs.WRRDMAWrite} {
		b.Run(op.String(), func(b *testing.B) {
			q, err := NewQueue(fakeQueue(b, 9, 64), SendWQESize(1, 64))
			if err != nil {
				b.Fatal(err)
			}
			wr := &verbs.SendWR{Opcode: op, SGList: []verbs.SGE{{Addr: 0x1000, Length: 64, LKey: 1}},
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

package qp_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// TestHammerRings drives every ring of an RC pair from several goroutines
// at once and checks every byte and every completion, to catch ordering
// bugs in the rings' index and element accesses on weakly ordered CPUs
// (make test-arm64 runs it on an arm64 kernel; amd64 runs it too). The
// queues are small, so the indexes wrap hundreds of times.
//
// What a missing barrier would look like here:
//   - a send WQE published (producer index) before its contents: the
//     kernel sends a stale length, address or wr_id — a receive with the
//     wrong bytes or length, or a send completion for a message already
//     completed or never posted;
//   - a receive WQE published before its SGE: data lands in the wrong
//     slot, or the receive completes with a length error;
//   - a CQE read before the producer index that covers it: a stale
//     completion (duplicate or unknown wr_id);
//   - the CQ consumer index released before the CQE was read: the kernel
//     overwrites it under us (same symptoms);
//   - received bytes read before the CQE that announces them: a payload
//     check fails.
//
// Senders post concurrently to one QP, pollers poll each CQ concurrently,
// and receivers repost receives concurrently, so the rings' locks are in
// the way too.
//
// A limit worth knowing: the test bed's arm64 guest is qemu TCG on an
// amd64 host. It runs the arm64 code (the arm64 build of internal/provider/rxe,
// its barriers and atomics) on several vCPUs at once, but the host's
// stronger (TSO) ordering hides most reorderings real arm64 cores make, so
// a pass here is evidence about the code paths, not proof about silicon;
// the arguments in internal/provider/rxe's comments carry the rest.
func TestHammerRings(t *testing.T) {
	const (
		senders   = 3
		pollers   = 2   // per CQ
		slots     = 4   // send buffers per sender
		recvSlots = 16  // receive buffers = receive queue depth
		slotSize  = 256 // bytes per buffer
	)
	perSender := 5000
	if testing.Short() {
		perSender = 500
	}
	p := testutil.NewPair(t, testutil.PairOptions{
		Caps: qp.Caps{MaxSendWR: 8, MaxRecvWR: recvSlots, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQE:  16,
	})
	sendBuf, recvBuf := p.A.MR.Bytes(), p.B.MR.Bytes()
	if senders*slots*slotSize > len(sendBuf) || recvSlots*slotSize > len(recvBuf) {
		t.Fatal("test buffers do not fit the pair's MRs")
	}

	var (
		stop     atomic.Bool // set on the first failure: every loop ends
		failOnce sync.Once
		failure  error
	)
	fail := func(format string, args ...any) {
		failOnce.Do(func() { failure = fmt.Errorf(format, args...) })
		stop.Store(true)
	}

	// A message: sender (u16), seq (u32), length (u16), then bytes that
	// depend on all three.
	msgLen := func(seq int) int { return 8 + (seq*37)%(slotSize-8) + 1 }
	payload := func(s, seq, i int) byte { return byte(s*131 + seq*7 + i*13 + 1) }

	// inFlight[s][slot] holds seq+1 while the send from that buffer is
	// posted and not completed; 0 when the buffer is free.
	var inFlight [senders][slots]atomic.Int64
	var sendDone, recvDone atomic.Int64
	// Credits: receives posted and not yet taken by a send. A sender takes
	// one before it posts, a receiver gives it back after reposting, so no
	// message finds the receive queue empty (an RNR NAK would stall the
	// sender for the RNR timer and make the run slow, not wrong).
	var credits atomic.Int64
	credits.Store(recvSlots)
	takeCredit := func() bool {
		for !stop.Load() {
			if c := credits.Load(); c > 0 && credits.CompareAndSwap(c, c-1) {
				return true
			}
			runtime.Gosched()
		}
		return false
	}
	var got [senders][]atomic.Bool
	for s := range got {
		got[s] = make([]atomic.Bool, perSender)
	}
	total := int64(senders * perSender)

	post := func(s, seq int) {
		slot := seq % slots
		off := (s*slots + slot) * slotSize
		n := msgLen(seq)
		buf := sendBuf[off : off+n]
		binary.LittleEndian.PutUint16(buf[0:], uint16(s))
		binary.LittleEndian.PutUint32(buf[2:], uint32(seq))
		binary.LittleEndian.PutUint16(buf[6:], uint16(n))
		for i := 8; i < n; i++ {
			buf[i] = payload(s, seq, i)
		}
		inFlight[s][slot].Store(int64(seq) + 1)
		wr := []verbs.SendWR{{
			WRID: uint64(s)<<32 | uint64(seq), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{testutil.SGE(p.A.MR, off, n)},
		}}
		for !stop.Load() {
			err := p.A.QP.PostSend(wr)
			if err == nil {
				return
			}
			if !errors.Is(err, verbs.ErrQueueFull) {
				fail("sender %d: post %d: %v", s, seq, err)
				return
			}
			runtime.Gosched()
		}
	}

	postRecv := func(slot int) error {
		return p.B.QP.PostRecv([]verbs.RecvWR{{WRID: uint64(slot),
			SGList: []verbs.SGE{testutil.SGE(p.B.MR, slot*slotSize, slotSize)}}})
	}
	for slot := 0; slot < recvSlots; slot++ {
		if err := postRecv(slot); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < perSender && !stop.Load(); seq++ {
				// Wait for this buffer's previous send to complete.
				for inFlight[s][seq%slots].Load() != 0 {
					if stop.Load() {
						return
					}
					runtime.Gosched()
				}
				if !takeCredit() {
					return
				}
				post(s, seq)
			}
		}()
	}
	// Send completions: each names a send in flight, exactly once.
	for i := 0; i < pollers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]verbs.WorkCompletion, 4)
			for sendDone.Load() < total && !stop.Load() {
				n, err := p.A.SendCQ.Poll(wcs)
				if err != nil {
					fail("poll send CQ: %v", err)
					return
				}
				if n == 0 {
					runtime.Gosched()
					continue
				}
				for _, wc := range wcs[:n] {
					s, seq := int(wc.WRID>>32), int(uint32(wc.WRID))
					if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCSend || wc.QPNum != p.A.QP.QPN() {
						fail("send completion %+v", wc)
						return
					}
					if s >= senders || seq >= perSender ||
						!inFlight[s][seq%slots].CompareAndSwap(int64(seq)+1, 0) {
						fail("send completion for sender %d seq %d, which is not in flight", s, seq)
						return
					}
					sendDone.Add(1)
				}
			}
		}()
	}
	// Receive completions: right length, right bytes, each message once;
	// then the buffer goes back to the receive queue.
	for i := 0; i < pollers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]verbs.WorkCompletion, 4)
			for recvDone.Load() < total && !stop.Load() {
				n, err := p.B.RecvCQ.Poll(wcs)
				if err != nil {
					fail("poll recv CQ: %v", err)
					return
				}
				if n == 0 {
					runtime.Gosched()
					continue
				}
				for _, wc := range wcs[:n] {
					if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRecv || wc.QPNum != p.B.QP.QPN() ||
						wc.WRID >= recvSlots {
						fail("receive completion %+v", wc)
						return
					}
					slot := int(wc.WRID)
					buf := recvBuf[slot*slotSize : (slot+1)*slotSize]
					s := int(binary.LittleEndian.Uint16(buf[0:]))
					seq := int(binary.LittleEndian.Uint32(buf[2:]))
					n := int(binary.LittleEndian.Uint16(buf[6:]))
					if s >= senders || seq >= perSender || n != msgLen(seq) || int(wc.ByteLen) != n {
						fail("receive in slot %d: sender %d seq %d length %d, byte_len %d", slot, s, seq, n, wc.ByteLen)
						return
					}
					for i := 8; i < n; i++ {
						if buf[i] != payload(s, seq, i) {
							fail("sender %d seq %d: byte %d is %#x, want %#x", s, seq, i, buf[i], payload(s, seq, i))
							return
						}
					}
					if got[s][seq].Swap(true) {
						fail("sender %d seq %d received twice", s, seq)
						return
					}
					recvDone.Add(1)
					if err := postRecv(slot); err != nil {
						fail("repost receive %d: %v", slot, err)
						return
					}
					credits.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	if sendDone.Load() != total || recvDone.Load() != total {
		t.Fatalf("%d sends and %d receives completed, want %d each", sendDone.Load(), recvDone.Load(), total)
	}
	t.Logf("%d messages from %d goroutines, %d pollers per CQ, on %s", total, senders, pollers, runtime.GOARCH)
}

package rsocket

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The simulated wire: two streams wired to each other through memory
// instead of a device. Each posted message is queued, and delivering it
// does what the peer's device would do: check the key and the bounds of
// the remote write, place the bytes, report the receive completion
// (stream.recv) and then the sender's completion (stream.sent). It tests
// the protocol logic — flow control, buffer halves, SGL updates, the
// receive ring — on the host, with C's sizes or odd ones.

type simSide struct {
	name     string
	s        *stream
	rbuf     []byte
	tmem     []byte
	tmemAddr uint64
	tkey     uint32
	sbuf     []byte
	out      []simMsg // posted, not yet delivered
	got      []byte   // what the application read
	olen     int
}

type simMsg struct {
	wrID    uint64
	imm     uint32
	payload []byte
	raddr   uint64
	rkey    uint32
}

type simPair struct {
	t    testing.TB
	a, b *simSide
}

func newSimSide(name string, base uint64, cfg streamConfig) *simSide {
	x := &simSide{name: name}
	x.rbuf = make([]byte, cfg.rbufSize)
	x.tmem = make([]byte, sglSize*sgeSize+cfg.iomapLen*iomapSize)
	x.sbuf = make([]byte, cfg.sbufSize)
	x.tmemAddr = base + 0x1000_0000
	x.tkey = uint32(base>>32) | 1
	cfg.rbufAddr = base
	cfg.rbufKey = uint32(base>>32) | 2
	cfg.tmem = x.tmem
	x.s = newStream(cfg)
	return x
}

func newSimPair(t testing.TB, ca, cb streamConfig) *simPair {
	p := &simPair{t: t, a: newSimSide("a", 0x7f00_0000_0000, ca), b: newSimSide("b", 0x7e00_0000_0000, cb)}
	da := p.a.s.localConnData(p.a.tmemAddr, p.a.tkey)
	db := p.b.s.localConnData(p.b.tmemAddr, p.b.tkey)
	// Through the wire format, as the CM would carry it.
	ba, bb := da.marshal(), db.marshal()
	pa, err := parseConnData(ba[:])
	if err != nil {
		t.Fatal(err)
	}
	pb, err := parseConnData(bb[:])
	if err != nil {
		t.Fatal(err)
	}
	p.a.s.connect(pb)
	p.b.s.connect(pa)
	return p
}

// write posts as many messages of data as x may send now and returns
// how many bytes it took.
func (x *simSide) write(data []byte) int {
	n := 0
	for n < len(data) && x.s.canSend() {
		c := x.s.nextChunk(len(data)-n, &x.olen)
		payload := append([]byte(nil), data[n:n+c.n]...)
		if !c.inline {
			// Through the send buffer ring, as postData copies it.
			first := c.n - c.wrap
			copy(x.sbuf[c.off:c.off+first], payload[:first])
			copy(x.sbuf[:c.wrap], payload[first:])
			payload = append(append([]byte(nil), x.sbuf[c.off:c.off+first]...), x.sbuf[:c.wrap]...)
		}
		x.out = append(x.out, simMsg{wrID: uint64(c.imm), imm: c.imm, payload: payload, raddr: c.raddr, rkey: c.rkey})
		n += c.n
	}
	return n
}

// credits posts x's credit update if one is due.
func (x *simSide) credits() {
	if !x.s.giveCredits() {
		return
	}
	c := x.s.credits()
	m := simMsg{wrID: uint64(c.imm), imm: c.imm}
	if c.sge {
		m.payload, m.raddr, m.rkey = append([]byte(nil), c.e[:]...), c.raddr, c.rkey
	}
	x.out = append(x.out, m)
}

// read consumes up to n bytes.
func (x *simSide) read(n int) int {
	buf := make([]byte, n)
	k := x.s.consume(buf, x.rbuf)
	x.got = append(x.got, buf[:k]...)
	return k
}

// deliver carries x's oldest message to its peer y.
func (p *simPair) deliver(x, y *simSide) error {
	m := x.out[0]
	x.out = x.out[1:]
	if len(m.payload) > 0 {
		// The peer's device: the key names a region, the write must
		// fit in it.
		var mem []byte
		var base uint64
		switch m.rkey {
		case y.s.rbufKey:
			mem, base = y.rbuf, y.s.rbufAddr
		case y.tkey:
			mem, base = y.tmem, y.tmemAddr
		default:
			return fmt.Errorf("%s→%s: write with unknown rkey %#x", x.name, y.name, m.rkey)
		}
		off := m.raddr - base
		if m.raddr < base || off+uint64(len(m.payload)) > uint64(len(mem)) {
			return fmt.Errorf("%s→%s: write of %d bytes at %#x outside [%#x, +%d)", x.name, y.name, len(m.payload), m.raddr, base, len(mem))
		}
		copy(mem[off:], m.payload)
	}
	if y.s.msgSend {
		// iWARP: the WRITE placed the payload; the SEND's word is
		// all the receive completion has.
		if err := y.s.recvMsg(m.imm); err != nil {
			return fmt.Errorf("%s→%s: %w", x.name, y.name, err)
		}
		x.s.sent(m.wrID, true)
		if len(m.payload) > 0 { // the SEND that followed the WRITE
			x.s.sent(uint64(msg(msgOp(m.imm), 0))|msgSendFlag, true)
		}
		return nil
	}
	if err := y.s.recv(m.imm, uint32(len(m.payload))); err != nil {
		return fmt.Errorf("%s→%s: %w", x.name, y.name, err)
	}
	x.s.sent(m.wrID, true)
	return nil
}

// pattern is the byte at offset i of a test stream.
func pattern(seed, i int) byte { return byte(i*7 + i>>8 + seed) }

func fill(seed, from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = pattern(seed, from+i)
	}
	return b
}

// transfer streams total bytes a→b and total bytes b→a, in writes and
// reads of random sizes, delivering messages in random order between the
// directions (in order within one), and checks every byte.
func (p *simPair) transfer(rng *rand.Rand, total, maxIO int) {
	p.t.Helper()
	sentA, sentB := 0, 0
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			p.t.Fatalf("no progress: a sent %d read %d, b sent %d read %d", sentA, len(p.a.got), sentB, len(p.b.got))
		}
		if len(p.a.got) == total && len(p.b.got) == total && len(p.a.out) == 0 && len(p.b.out) == 0 {
			break
		}
		switch rng.IntN(6) {
		case 0:
			if sentA < total {
				n := min(1+rng.IntN(maxIO), total-sentA)
				p.a.olen = olapStartSize
				sentA += p.a.write(fill(1, sentA, n))
			}
		case 1:
			if sentB < total {
				n := min(1+rng.IntN(maxIO), total-sentB)
				p.b.olen = olapStartSize
				sentB += p.b.write(fill(2, sentB, n))
			}
		case 2:
			p.b.read(1 + rng.IntN(maxIO))
			p.b.credits()
		case 3:
			p.a.read(1 + rng.IntN(maxIO))
			p.a.credits()
		case 4:
			if len(p.a.out) > 0 {
				if err := p.deliver(p.a, p.b); err != nil {
					p.t.Fatal(err)
				}
			}
		case 5:
			if len(p.b.out) > 0 {
				if err := p.deliver(p.b, p.a); err != nil {
					p.t.Fatal(err)
				}
			}
		}
	}
	if !bytes.Equal(p.b.got, fill(1, 0, total)) {
		p.t.Fatalf("b read wrong data (first difference at %d)", firstDiff(p.b.got, fill(1, 0, total)))
	}
	if !bytes.Equal(p.a.got, fill(2, 0, total)) {
		p.t.Fatalf("a read wrong data (first difference at %d)", firstDiff(p.a.got, fill(2, 0, total)))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func cfg(sq, rq, inline, sbuf, rbuf int) streamConfig {
	return streamConfig{sqSize: sq, rqSize: rq, sqInline: inline, sbufSize: sbuf, rbufSize: rbuf}
}

func TestSimTransfer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   streamConfig
		total  int
		maxIO  int
		rounds int
	}{
		{"defaults", cfg(384, 384, 64, 128<<10, 128<<10), cfg(384, 384, 64, 128<<10, 128<<10), 3 << 20, 200 << 10, 3},
		{"small buffers", cfg(16, 16, 0, 4096, 4096), cfg(16, 16, 0, 4096, 4096), 300 << 10, 10000, 5},
		{"odd sizes", cfg(17, 23, 9, 5000, 7002), cfg(31, 16, 100, 4098, 6000), 500 << 10, 9999, 5},
		{"asymmetric", cfg(384, 16, 64, 1<<20, 4096), cfg(16, 384, 0, 4096, 1<<20), 2 << 20, 100 << 10, 3},
		{"tiny writes", cfg(16, 16, 64, 4096, 8192), cfg(16, 16, 64, 4096, 8192), 20 << 10, 7, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for r := range tc.rounds {
				rng := rand.New(rand.NewPCG(uint64(r), 42))
				p := newSimPair(t, tc.a, tc.b)
				p.transfer(rng, tc.total, tc.maxIO)
				for _, x := range []*simSide{p.a, p.b} {
					if x.s.sqeAvail != x.s.sqSize-qpCtrlSize || x.s.sbufAvail != x.s.sbufSize || x.s.ctrlSeq != x.s.ctrlMax-qpCtrlSize {
						t.Errorf("%s: resources not all back: sqe %d/%d sbuf %d/%d ctrl %d/%d", x.name,
							x.s.sqeAvail, x.s.sqSize-qpCtrlSize, x.s.sbufAvail, x.s.sbufSize, x.s.ctrlSeq, x.s.ctrlMax)
					}
				}
			}
		})
	}
}

// The same transfers in iWARP's variant (RS_OPT_MSG_SEND): a message
// with a payload takes two send queue (or control) slots, the receiver
// learns an SGL update's buffer from its target SGL entry, and every
// resource comes back.
func TestSimTransferMsgSend(t *testing.T) {
	msgSend := func(c streamConfig) streamConfig { c.msgSend = true; return c }
	for _, tc := range []struct {
		name  string
		a, b  streamConfig
		total int
		maxIO int
	}{
		{"defaults", cfg(384, 384, 64, 128<<10, 128<<10), cfg(384, 384, 64, 128<<10, 128<<10), 1 << 20, 200 << 10},
		{"small buffers", cfg(16, 16, 4, 4096, 4096), cfg(16, 16, 4, 4096, 4096), 100 << 10, 10000},
		{"odd sizes", cfg(17, 23, 9, 5000, 7002), cfg(31, 16, 100, 4098, 6000), 200 << 10, 9999},
		{"tiny writes", cfg(16, 16, 64, 4096, 8192), cfg(16, 16, 64, 4096, 8192), 10 << 10, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for r := range 2 {
				rng := rand.New(rand.NewPCG(uint64(r), 43))
				p := newSimPair(t, msgSend(tc.a), msgSend(tc.b))
				p.transfer(rng, tc.total, tc.maxIO)
				for _, x := range []*simSide{p.a, p.b} {
					if x.s.sqeAvail != x.s.sqSize-qpCtrlSize || x.s.sbufAvail != x.s.sbufSize || x.s.ctrlSeq != x.s.ctrlMax-qpCtrlSize {
						t.Errorf("%s: resources not all back: sqe %d/%d sbuf %d/%d ctrl %d/%d", x.name,
							x.s.sqeAvail, x.s.sqSize-qpCtrlSize, x.s.sbufAvail, x.s.sbufSize, x.s.ctrlSeq, x.s.ctrlMax)
					}
				}
				if p.a.s.stats.SGLBuffer == 0 || p.b.s.stats.SGLBuffer == 0 {
					t.Errorf("SGL updates: a got %v, b got %v; want buffers published both ways", p.a.s.stats, p.b.s.stats)
				}
			}
		})
	}
}

// iWARP's slot accounting (rs_write_data, rs_can_send, rs_send_credits,
// rs_2ctrl_avail): a data message takes two send queue slots, an SGL
// update with a buffer two control slots, and a credit update waits for
// two free ones; the passive side holds everything until the active
// side's first message.
func TestSimMsgSendSlots(t *testing.T) {
	c := cfg(16, 16, 64, 1<<20, 1<<20)
	c.msgSend = true
	p := newSimPair(t, c, c)
	p.b.s.held = true // b accepted the connection
	if p.b.s.canSend() || p.b.s.giveCredits() || p.b.s.ctrlAvail() || p.b.s.canWriteDirect() {
		t.Fatal("the passive side may post before the active side's first message")
	}
	p.a.credits() // the first SGL update: a WRITE and a SEND
	if p.a.s.ctrlSeq != 2 || len(p.a.out) != 1 || len(p.a.out[0].payload) != sgeSize {
		t.Fatalf("first update took %d control slots (want 2), %d messages", p.a.s.ctrlSeq, len(p.a.out))
	}
	if err := p.deliver(p.a, p.b); err != nil {
		t.Fatal(err)
	}
	if p.b.s.held || p.b.s.stats.SGLBuffer != 1 || p.b.s.target[1].Length == 0 {
		t.Fatalf("after a's first message: held %v, stats %v, entry 1 %+v", p.b.s.held, p.b.s.stats, p.b.s.target[1])
	}
	if e := getSGE(p.b.tmem[sgeSize:2*sgeSize], native); e.Length != 0 {
		t.Fatalf("entry 1 still says %d bytes after it was taken", e.Length)
	}
	if p.a.s.ctrlSeq != p.a.s.ctrlMax-qpCtrlSize {
		t.Fatalf("control slots not back: %d/%d", p.a.s.ctrlSeq, p.a.s.ctrlMax)
	}
	// 12 send queue slots for data: 6 messages.
	n := 0
	for range 10 {
		p.b.olen = olapStartSize
		n += p.b.write(fill(1, n, 100))
	}
	if n != 600 || p.b.s.sqeAvail != 0 {
		t.Fatalf("wrote %d bytes with %d slots left, want 600 and 0", n, p.b.s.sqeAvail)
	}
	// Three control slots taken: a credit update needs two free.
	p.a.s.ctrlSeq += 3
	if p.a.s.giveCredits() {
		t.Fatal("credits due with one control slot free")
	}
	p.a.s.ctrlSeq -= 3
	for len(p.b.out) > 0 {
		if err := p.deliver(p.b, p.a); err != nil {
			t.Fatal(err)
		}
	}
	if p.b.s.sqeAvail != 12 {
		t.Fatalf("%d send queue slots back, want 12", p.b.s.sqeAvail)
	}
	p.a.read(600)
	if !bytes.Equal(p.a.got, fill(1, 0, 600)) {
		t.Fatal("a read wrong data")
	}
	// A credit-only update: one SEND, one control slot; the receiver
	// tells it from an SGL update by its empty target SGL entry.
	p.a.s.rbufAvail = 0
	p.a.s.rseqComp = p.a.s.rseqNo
	p.a.credits()
	if len(p.a.out) != 1 || len(p.a.out[0].payload) != 0 || p.a.s.ctrlSeq != p.a.s.ctrlMax-qpCtrlSize+1 {
		t.Fatalf("credit-only update: %d messages, ctrl %d/%d", len(p.a.out), p.a.s.ctrlSeq, p.a.s.ctrlMax)
	}
	if err := p.deliver(p.a, p.b); err != nil {
		t.Fatal(err)
	}
	if p.b.s.stats.SGLCredit != 1 || p.b.s.stats.SGLBuffer != 1 {
		t.Fatalf("b got %v, want one update of each kind", p.b.s.stats)
	}
}

// A sender never has more than the receiver's queue size of data
// messages in flight and unread, and fills buffer halves in order.
func TestSimCredits(t *testing.T) {
	p := newSimPair(t, cfg(64, 16, 0, 1<<20, 1<<20), cfg(64, 16, 0, 1<<20, 1<<20))
	// b's first update publishes half 1 of its buffer, with the limit
	// it gave in the private data.
	p.b.credits()
	if m := p.b.out[0]; msgOp(m.imm) != opSGL || msgData(m.imm) != 16 || len(m.payload) != sgeSize {
		t.Fatalf("first update %#x with %d bytes, want SGL limit 16 with a buffer", m.imm, len(m.payload))
	}
	if err := p.deliver(p.b, p.a); err != nil {
		t.Fatal(err)
	}
	// Writes of 100 bytes: the 16 credits run out long before the
	// buffer half.
	total := 0
	for range 100 {
		p.a.olen = olapStartSize
		total += p.a.write(fill(1, total, 100))
	}
	if total != 16*100 {
		t.Fatalf("sent %d bytes before the credits ran out, want %d", total, 16*100)
	}
	for len(p.a.out) > 0 {
		if err := p.deliver(p.a, p.b); err != nil {
			t.Fatal(err)
		}
	}
	p.a.olen = olapStartSize
	if n := p.a.write(fill(1, total, 100)); n != 0 {
		t.Fatalf("wrote %d bytes without credits", n)
	}
	// Reading half the messages is what makes the receiver grant
	// again (rseq_comp = rq_size/2).
	p.b.read(700)
	if p.b.s.giveCredits() {
		t.Fatal("credits due after 7 of 16 messages")
	}
	p.b.read(100)
	if !p.b.s.giveCredits() {
		t.Fatal("no credits due after 8 of 16 messages")
	}
	p.b.credits()
	if m := p.b.out[0]; msgOp(m.imm) != opSGL || msgData(m.imm) != 8+16 || len(m.payload) != 0 {
		t.Fatalf("credit message %#x with %d bytes, want SGL limit 24 without buffer", m.imm, len(m.payload))
	}
	if err := p.deliver(p.b, p.a); err != nil {
		t.Fatal(err)
	}
	more := 0
	for range 100 {
		p.a.olen = olapStartSize
		more += p.a.write(fill(1, total+more, 100))
	}
	if more != 8*100 {
		t.Fatalf("after the grant: sent %d bytes, want %d (8 more messages)", more, 8*100)
	}
}

// The first SGL update publishes half 1 into the sender's entry 1, the
// next half 0 into entry 0 — in the sender's byte order.
func TestSimSGLUpdates(t *testing.T) {
	for _, bigPeer := range []bool{false, true} {
		p := newSimPair(t, cfg(64, 64, 0, 1<<20, 8192), cfg(64, 64, 0, 1<<20, 8192))
		if bigPeer {
			p.b.s.peerOrder = bigEndian // as if a said RS_CONN_FLAG_NET
		}
		var raddrs []uint64
		for round := range 4 {
			p.a.olen = olapStartSize
			if n := p.a.write(fill(1, round*4096, 4096)); n != 4096 {
				t.Fatalf("round %d: wrote %d of 4096", round, n)
			}
			for len(p.a.out) > 0 {
				if err := p.deliver(p.a, p.b); err != nil {
					t.Fatal(err)
				}
			}
			p.b.read(4096)
			p.b.credits()
			m := p.b.out[0]
			if len(m.payload) != sgeSize {
				t.Fatalf("round %d: credit message without buffer", round)
			}
			e := getSGE(m.payload, p.b.s.peerOrder)
			wantAddr := p.b.s.rbufAddr + uint64(4096*((round+1)%2))
			if e.Addr != wantAddr || e.Length != 4096 || e.Key != p.b.s.rbufKey {
				t.Fatalf("round %d: published %+v, want addr %#x length 4096", round, e, wantAddr)
			}
			raddrs = append(raddrs, m.raddr)
			if bigPeer {
				break // a reads its entries natively; stop before it does
			}
			if err := p.deliver(p.b, p.a); err != nil {
				t.Fatal(err)
			}
		}
		if bigPeer {
			continue
		}
		entry := func(i int) uint64 { return p.a.tmemAddr + uint64(i*sgeSize) }
		if want := []uint64{entry(1), entry(0), entry(1), entry(0)}; fmt.Sprint(raddrs) != fmt.Sprint(want) {
			t.Errorf("SGL updates went to %#x, want %#x", raddrs, want)
		}
	}
}

// Peers that break the rules get ErrProtocol, and nothing else changes.
func TestSimHostile(t *testing.T) {
	newB := func() *simPair { return newSimPair(t, cfg(64, 16, 0, 1<<20, 8192), cfg(64, 16, 0, 1<<20, 8192)) }
	for _, tc := range []struct {
		name string
		do   func(p *simPair) error
	}{
		{"more data than granted", func(p *simPair) error { return p.b.s.recv(msg(opData, 4097), 4097) }},
		{"length mismatch", func(p *simPair) error { return p.b.s.recv(msg(opData, 100), 99) }},
		{"credits exceeded", func(p *simPair) error {
			for i := range 17 {
				if err := p.b.s.recv(msg(opData, 1), 1); err != nil {
					if i != 16 {
						return fmt.Errorf("message %d: %w", i, err)
					}
					return err
				}
			}
			return nil
		}},
		{"reserved op 1", func(p *simPair) error { return p.b.s.recv(1<<29|5, 5) }},
		{"reserved op 3", func(p *simPair) error { return p.b.s.recv(3<<29, 0) }},
		{"reserved op 5", func(p *simPair) error { return p.b.s.recv(5<<29, 0) }},
		{"unknown control", func(p *simPair) error { return p.b.s.recv(msg(opCtrl, 9), 0) }},
		{"SGL of 8 bytes", func(p *simPair) error { return p.b.s.recv(msg(opSGL, 20), 8) }},
		{"empty SGL entry", func(p *simPair) error { return p.b.s.recv(msg(opSGL, 20), sgeSize) }},
		{"SGL over a busy entry", func(p *simPair) error {
			// Entry 1 gets a buffer; a second update for entry 0
			// while a has not filled it yet.
			sge{Addr: 1, Key: 1, Length: 100}.put(p.b.tmem[sgeSize:], native)
			if err := p.b.s.recv(msg(opSGL, 20), sgeSize); err != nil {
				return fmt.Errorf("first: %w", err)
			}
			sge{Addr: 1, Key: 1, Length: 100}.put(p.b.tmem[0:], native)
			return p.b.s.recv(msg(opSGL, 20), sgeSize)
		}},
		{"iomap entry out of range", func(p *simPair) error { return p.b.s.recv(msg(opIOMapSGL, 0), iomapSize) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(newB()); !errors.Is(err, ErrProtocol) {
				t.Errorf("err %v, want ErrProtocol", err)
			}
		})
	}
}

// Shutdown and disconnect messages change the state as C's rs_poll_cq
// does.
func TestSimControl(t *testing.T) {
	p := newSimPair(t, cfg(64, 16, 0, 8192, 8192), cfg(64, 16, 0, 8192, 8192))
	if err := p.b.s.recv(msg(opCtrl, ctrlShutdown), 0); err != nil {
		t.Fatal(err)
	}
	if st := p.b.s.state; st != stConnected|stWritable {
		t.Fatalf("after SHUTDOWN: state %#x, want connected|writable", st)
	}
	if err := p.b.s.recv(msg(opCtrl, ctrlKeepalive), 0); err != nil {
		t.Fatal(err)
	}
	p.b.s.state &^= stWritable
	if err := p.b.s.recv(msg(opCtrl, ctrlShutdown), 0); err != nil {
		t.Fatal(err)
	}
	if st := p.b.s.state; st != stDisconnected {
		t.Fatalf("SHUTDOWN when not writable: state %#x, want disconnected", st)
	}
	p = newSimPair(t, cfg(64, 16, 0, 8192, 8192), cfg(64, 16, 0, 8192, 8192))
	if err := p.b.s.recv(msg(opCtrl, ctrlDisconnect), 0); err != nil {
		t.Fatal(err)
	}
	if p.b.s.state != stDisconnected || p.b.s.giveCredits() {
		t.Fatalf("after DISCONNECT: state %#x", p.b.s.state)
	}
}

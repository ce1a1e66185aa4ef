package rsocket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzConnData feeds arbitrary private data to the parser: it either
// fails with ErrProtocol or returns what marshals back to the same
// bytes (but the reserved ones).
func FuzzConnData(f *testing.F) {
	good := (&connData{Version: 1, Flags: connFlagIOMap, Credits: 384, TargetSGL: sge{Addr: 1 << 40, Key: 7, Length: 2},
		DataBuf: sge{Addr: 2 << 40, Key: 8, Length: 1 << 16}}).marshal()
	f.Add(good[:])
	f.Add(append(good[:], make([]byte, 16)...))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseConnData(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		back := d.marshal()
		want := append([]byte(nil), b[:connDataSize]...)
		copy(want[4:7], []byte{0, 0, 0})
		if !bytes.Equal(back[:], want) {
			t.Fatalf("round trip:\n got % x\nwant % x", back, want)
		}
	})
}

// FuzzStream drives one side of a connection with arbitrary peer
// messages — immediates, byte counts, whatever the peer writes into the
// target SGL and iomap table — interleaved with the application reading,
// writing and granting credits. The stream must never panic or index
// outside its buffers, must keep its accounting consistent, and must
// report every violation as ErrProtocol.
func FuzzStream(f *testing.F) {
	// A well-behaved peer: an SGL update with a buffer, data, credits.
	var seed bytes.Buffer
	seed.WriteByte(1) // peer writes entry 1
	seed.WriteByte(16)
	var e [sgeSize]byte
	sge{Addr: 0x1000, Key: 9, Length: 4096}.put(e[:], native)
	seed.Write(e[:])
	seed.WriteByte(0) // recv SGL with buffer
	seed.Write(binary.BigEndian.AppendUint32(nil, msg(opSGL, 40)))
	seed.Write([]byte{0, 16})
	seed.WriteByte(0) // data
	seed.Write(binary.BigEndian.AppendUint32(nil, msg(opData, 1000)))
	seed.Write(binary.BigEndian.AppendUint32(nil, 1000)[2:])
	seed.Write([]byte{2, 200, 3, 4, 0x10, 5})
	f.Add(seed.Bytes())
	f.Add([]byte{0, 0xE0, 0, 0, 2, 0, 0, 4, 1, 0, 2, 9})
	f.Add([]byte{0, 0x20, 0, 0, 5, 0, 5})

	f.Fuzz(func(t *testing.T, in []byte) {
		const rbufSize, rqSize, iomapLen = 8192, 16, 2
		tmem := make([]byte, sglSize*sgeSize+iomapLen*iomapSize)
		rbuf := make([]byte, rbufSize)
		s := newStream(streamConfig{sqSize: 32, rqSize: rqSize, sqInline: 16, sbufSize: 4096, rbufSize: rbufSize,
			rbufAddr: 0x5000, rbufKey: 3, tmem: tmem, iomapLen: iomapLen})
		s.connect(connData{Version: 1, Flags: connFlagIOMap, Credits: 16, IOMapSize: 1,
			TargetSGL: sge{Addr: 0x9000, Key: 4, Length: 2}, DataBuf: sge{Addr: 0xa000, Key: 5, Length: 4096}})
		var posted []uint64 // our sends not yet completed
		next := func(n int) []byte {
			if len(in) < n {
				in = nil
				return nil
			}
			b := in[:n]
			in = in[n:]
			return b
		}
		for len(in) > 0 {
			op := next(1)[0]
			var err error
			switch op % 7 {
			case 0: // a receive completion
				b := next(6)
				if b == nil {
					return
				}
				err = s.recv(binary.BigEndian.Uint32(b), uint32(binary.BigEndian.Uint16(b[4:])))
			case 1: // the peer's RDMA write into the target SGL/iomap table
				b := next(2)
				if b == nil {
					return
				}
				off := int(b[0]) % len(tmem)
				copy(tmem[off:], next(min(int(b[1]), len(tmem)-off)))
			case 2: // the application reads
				b := next(1)
				if b == nil {
					return
				}
				p := make([]byte, int(b[0])*40)
				before := s.rbufAvail
				n := s.consume(p, rbuf)
				if n > len(p) || s.rbufAvail != before+n {
					t.Fatalf("consume returned %d of %d, rbufAvail %d -> %d", n, len(p), before, s.rbufAvail)
				}
			case 3: // credits
				if s.giveCredits() {
					c := s.credits()
					posted = append(posted, uint64(c.imm))
				}
			case 4: // the application writes
				b := next(1)
				if b == nil {
					return
				}
				olen := olapStartSize
				if s.canSend() {
					c := s.nextChunk(int(b[0])*100+1, &olen)
					if c.n <= 0 || c.off < 0 || c.off+c.n-c.wrap > s.sbufSize || c.wrap < 0 || c.wrap > s.sbufSize {
						t.Fatalf("chunk %+v outside the send buffer of %d", c, s.sbufSize)
					}
					posted = append(posted, uint64(c.imm))
				}
			case 5: // our oldest send completes
				if len(posted) > 0 {
					s.sent(posted[0], true)
					posted = posted[1:]
				}
			case 6: // a disconnect or shutdown we send
				if s.ctrlAvail() {
					s.ctrlSeq++
					posted = append(posted, uint64(msg(opCtrl, ctrlShutdown)))
				}
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v does not wrap ErrProtocol", err)
				}
				return // the connection fails here
			}
			unread := 0
			count := 0
			for i := s.rmsgHead; i != s.rmsgTail; i = (i + 1) % len(s.rmsg) {
				unread += int(s.rmsg[i])
				count++
			}
			if count > rqSize {
				t.Fatalf("%d messages unread, credits were %d", count, rqSize)
			}
			if s.rbufAvail < 0 || s.rbufGrant < 0 || s.rbufAvail+s.rbufGrant+unread != rbufSize {
				t.Fatalf("receive buffer accounting: avail %d + granted %d + unread %d != %d", s.rbufAvail, s.rbufGrant, unread, rbufSize)
			}
			if s.rbufOff < 0 || s.rbufOff >= rbufSize || s.rbufFree < 0 || s.rbufFree >= rbufSize {
				t.Fatalf("receive offsets %d, %d", s.rbufOff, s.rbufFree)
			}
			if s.sbufAvail < 0 || s.sbufAvail > s.sbufSize || s.sqeAvail < 0 || s.sqeAvail > s.sqSize-qpCtrlSize {
				t.Fatalf("send accounting: sbuf %d sqe %d", s.sbufAvail, s.sqeAvail)
			}
			if int(s.ctrlMax-s.ctrlSeq) < 0 || s.ctrlMax-s.ctrlSeq > qpCtrlSize {
				t.Fatalf("control slots: seq %d max %d", s.ctrlSeq, s.ctrlMax)
			}
		}
	})
}

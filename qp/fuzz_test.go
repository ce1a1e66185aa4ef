package qp

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/provider/rxe"
	"github.com/goverbs/goverbs/verbs"
)

// FuzzSendWR: validation is what keeps the encoder inside its element. For
// any work request validateSend accepts, WriteSend writes nothing past the
// element size the kernel gives a QP with these capabilities, and the
// opcode that reaches the queue is one the provider knows.
func FuzzSendWR(f *testing.F) {
	f.Add(uint8(RC), uint32(verbs.WRRDMAWrite), uint32(2), uint8(3), uint16(0), uint64(0x1000), uint8(2), uint16(64))
	f.Add(uint8(RC), uint32(verbs.WRAtomicCmpAndSwp), uint32(2), uint8(1), uint16(0), uint64(0x1008), uint8(1), uint16(0))
	f.Add(uint8(UC), uint32(verbs.WRSendWithImm), uint32(10), uint8(0), uint16(64), uint64(0), uint8(4), uint16(64))
	f.Add(uint8(UD), uint32(15), uint32(0), uint8(0), uint16(1), uint64(0), uint8(1), uint16(16))
	f.Fuzz(func(t *testing.T, typ uint8, opcode, flags uint32, nsge uint8, ninline uint16, raddr uint64, maxSGE uint8, maxInline uint16) {
		if maxSGE > 32 || maxInline > 512 {
			return
		}
		q := &QP{typ: Type(typ), sqSGE: int(maxSGE), caps: Caps{MaxSendSGE: int(maxSGE), MaxInlineData: int(maxInline)}}
		if q.typ != RC && q.typ != UC && q.typ != UD {
			return
		}
		wr := verbs.SendWR{Opcode: verbs.WROpcode(opcode), Flags: verbs.SendFlags(flags), RemoteAddr: raddr}
		if wr.Opcode == verbs.WRFlush || wr.Opcode == verbs.WRAtomicWrite {
			// Their validation asks the device's capabilities, which this
			// QP without a device cannot answer; device tests cover them.
			return
		}
		for i := 0; i < int(nsge); i++ {
			wr.SGList = append(wr.SGList, verbs.SGE{Addr: uint64(i), Length: 8, LKey: 1})
		}
		if ninline > 0 {
			wr.InlineData = make([]byte, ninline)
		}
		_, err := q.validateSend(&wr) // UD without an AH does not pass: no AH number to write
		if err != nil {
			return
		}
		if wr.Opcode > verbs.WRSendWithInv {
			t.Fatalf("opcode %d passed validation", wr.Opcode)
		}
		if (wr.Opcode == verbs.WRLocalInv || wr.Opcode == verbs.WRBindMW) && (len(wr.SGList) != 0 || wr.InlineData != nil || q.typ == UD) {
			t.Fatalf("%v with data or on UD passed validation", wr.Opcode)
		}
		elem := rxe.SendWQESize(uint32(maxSGE), uint32(maxInline))
		const guard = 256
		buf := make([]byte, elem+guard)
		for i := range buf[elem:] {
			buf[elem+uintptr(i)] = 0xa5
		}
		rxe.WriteSend(unsafe.Pointer(&buf[0]), &provider.View[provider.SendWR]([]verbs.SendWR{wr})[0], q.typ == UD, 0, 1)
		for i, b := range buf[elem:] {
			if b != 0xa5 {
				t.Fatalf("WriteSend wrote byte %d past a %d-byte element", i, elem)
			}
		}
	})
}

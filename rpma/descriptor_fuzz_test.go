package rpma_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/rpma"
)

// FuzzRemoteMRFromDescriptor: any bytes decode without a panic; librpma's
// rules decide acceptance (at least 21 bytes, non-zero usage; extra bytes
// ignored); an accepted descriptor yields exactly the little-endian fields,
// and a refused one fails with RPMA_E_INVAL.
func FuzzRemoteMRFromDescriptor(f *testing.F) {
	valid := make([]byte, rpma.DescriptorSize)
	binary.LittleEndian.PutUint64(valid[0:], 0x7f0000001000)
	binary.LittleEndian.PutUint64(valid[8:], 4096)
	binary.LittleEndian.PutUint32(valid[16:], 0x1234)
	valid[20] = byte(rpma.UsageWriteDst | rpma.UsageFlushVisibility)
	f.Add(valid)
	f.Add(append(append([]byte{}, valid...), 0xff, 1)) // followed by a peer cfg
	f.Add(valid[:20])
	f.Add(make([]byte, rpma.DescriptorSize)) // usage 0
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, desc []byte) {
		r, err := rpma.RemoteMRFromDescriptor(desc)
		ok := len(desc) >= rpma.DescriptorSize && desc[20] != 0
		if !ok {
			if err == nil || !errors.Is(err, rpma.ErrInval) {
				t.Fatalf("descriptor %x: %+v, %v; want RPMA_E_INVAL", desc, r, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid descriptor %x refused: %v", desc, err)
		}
		want := rpma.RemoteMR{
			Addr:   binary.LittleEndian.Uint64(desc[0:]),
			Length: binary.LittleEndian.Uint64(desc[8:]),
			RKey:   binary.LittleEndian.Uint32(desc[16:]),
			Usage:  rpma.Usage(desc[20]),
		}
		if *r != want || r.Size() != want.Length {
			t.Fatalf("descriptor %x decoded to %+v, want %+v", desc, *r, want)
		}
	})
}

// FuzzPeerCfgFromDescriptor: one byte or more decodes (non-zero means
// direct write to PMem) and re-encodes to the canonical byte; nothing
// decodes from an empty descriptor.
func FuzzPeerCfgFromDescriptor(f *testing.F) {
	for _, s := range [][]byte{{0}, {1}, {0xff}, {}, {1, 2, 3}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc []byte) {
		c, err := rpma.PeerCfgFromDescriptor(desc)
		if len(desc) == 0 {
			if !errors.Is(err, rpma.ErrInval) {
				t.Fatalf("empty descriptor: %+v, %v; want RPMA_E_INVAL", c, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("descriptor %x: %v", desc, err)
		}
		if c.DirectWriteToPMem != (desc[0] != 0) {
			t.Fatalf("descriptor %x: direct write %v", desc, c.DirectWriteToPMem)
		}
		back, err := rpma.PeerCfgFromDescriptor(c.Descriptor())
		if err != nil || *back != *c || len(c.Descriptor()) != 1 {
			t.Fatalf("descriptor %x re-encodes to %x (%+v, %v)", desc, c.Descriptor(), back, err)
		}
	})
}

package cm_test

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/uverbs"
)

// FuzzPrivateData: whatever arrives as private data (any length, any
// padding) decodes without a panic to a payload inside the received bytes,
// and whatever EncodePrivateData accepts comes back unchanged through the
// kernel's zero padding to each message's size.
func FuzzPrivateData(f *testing.F) {
	f.Add([]byte("hello"), []byte{5, 'h', 'e', 'l', 'l', 'o', 0, 0})
	f.Add([]byte{}, []byte{0})
	f.Add(bytes.Repeat([]byte{0xab}, 255), []byte{255, 1})
	f.Add([]byte{1, 2, 3}, []byte{})
	f.Fuzz(func(t *testing.T, payload, raw []byte) {
		if got, err := cm.DecodePrivateData(raw); err == nil {
			if len(raw) == 0 || len(got) != int(raw[0]) || !bytes.Equal(got, raw[1:1+len(got)]) {
				t.Fatalf("raw %x decoded to %x", raw, got)
			}
		}
		enc, err := cm.EncodePrivateData(payload)
		if len(payload) > 255 {
			if err == nil {
				t.Fatalf("%d-byte payload framed", len(payload))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		// The kernel pads to the carrying message's size: REQ 56, REP 196,
		// REJ 148 bytes (RDMA_MAX_PRIVATE_DATA at most).
		for _, size := range []int{len(enc), 56, 148, 196, uverbs.RDMA_MAX_PRIVATE_DATA} {
			if size < len(enc) {
				continue
			}
			padded := make([]byte, size)
			copy(padded, enc)
			got, err := cm.DecodePrivateData(padded)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("payload %x padded to %d decoded to %x, %v", payload, size, got, err)
			}
		}
	})
}

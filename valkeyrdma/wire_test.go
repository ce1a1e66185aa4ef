package valkeyrdma_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/valkeyrdma"
)

// The control messages' layout, as valkey 8.1.1's src/rdma.c has it:
// big-endian opcode at 0, feature selector at 2 and feature bits at 24;
// RegisterXferMemory's address at 16, length at 24 and rkey at 28.
func TestCommandLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  valkeyrdma.Command
		want string
	}{
		{"GetServerFeature", valkeyrdma.NewCommand(0, 0x1234, 0x0102030405060708, 0, 0, 0),
			"0000123400000000000000000000000000000000000000000102030405060708"},
		{"Keepalive", valkeyrdma.NewCommand(2, 0, 0, 0, 0, 0),
			"0002000000000000000000000000000000000000000000000000000000000000"},
		{"RegisterXferMemory", valkeyrdma.NewCommand(3, 0, 0, 0x00007f0011223344, 1<<20, 0xabcdef01),
			"00030000000000000000000000000000" + "00007f0011223344" + "00100000" + "abcdef01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, 32)
			for i := range b {
				b[i] = 0xff // marshal zeroes what the opcode does not use
			}
			tc.cmd.Marshal(b)
			if got := hex.EncodeToString(b); got != tc.want {
				t.Errorf("marshal:\n got %s\nwant %s", got, tc.want)
			}
			back, err := valkeyrdma.ParseCommand(b)
			if err != nil {
				t.Fatal(err)
			}
			if back != tc.cmd {
				t.Errorf("parse gave %+v, want %+v", back, tc.cmd)
			}
		})
	}
}

func TestCommandRejects(t *testing.T) {
	good := make([]byte, 32)
	good[1] = 2
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", good[:31]},
		{"long", append(bytes.Clone(good), 0)},
		{"unknown opcode", append([]byte{0, 4}, good[2:]...)},
		{"empty buffer", append([]byte{0, 3}, good[2:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := valkeyrdma.ParseCommand(tc.b); !errors.Is(err, valkeyrdma.ErrProtocol) {
				t.Errorf("got %v, want ErrProtocol", err)
			}
		})
	}
}

func FuzzParseCommand(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add([]byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 0, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := valkeyrdma.ParseCommand(b)
		if err != nil {
			if !errors.Is(err, valkeyrdma.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		out := make([]byte, 32)
		c.Marshal(out)
		again, err := valkeyrdma.ParseCommand(out)
		if err != nil || again != c {
			t.Fatalf("round trip of %x: %+v, %v; was %+v", b, again, err, c)
		}
	})
}

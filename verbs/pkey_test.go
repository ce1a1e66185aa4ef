package verbs_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// TestPKey reads the P_Key table: a RoCE port (rxe) has the default P_Key
// 0xffff at index 0; a port whose QUERY_PORT reports a P_Key table of length
// 0 (siw, iWARP) refuses both calls with ErrNotCapable.
func TestPKey(t *testing.T) {
	ctx := testutil.Open(t)
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: P_Key table of %d entries", ctx.Device().Name, pa.PkeyTblLen)
	if pa.PkeyTblLen == 0 {
		if !testutil.IWARP(ctx) {
			t.Fatalf("%s: a RoCE port with a P_Key table of length 0", ctx.Device().Name)
		}
		if _, err := ctx.QueryPKey(1, 0); !errors.Is(err, verbs.ErrNotCapable) {
			t.Errorf("QueryPKey without a table: %v, want ErrNotCapable", err)
		}
		if _, err := ctx.PKeyIndex(1, verbs.DefaultPKey); !errors.Is(err, verbs.ErrNotCapable) {
			t.Errorf("PKeyIndex without a table: %v, want ErrNotCapable", err)
		}
		return
	}
	pkey, err := ctx.QueryPKey(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pkey != verbs.DefaultPKey {
		t.Errorf("P_Key 0 = %#04x, want %#04x", pkey, verbs.DefaultPKey)
	}
	if i, err := ctx.PKeyIndex(1, verbs.DefaultPKey); err != nil || i != 0 {
		t.Errorf("PKeyIndex(default) = %d, %v; want 0", i, err)
	}
	if _, err := ctx.PKeyIndex(1, 0x1234); !errors.Is(err, unix.ENOENT) {
		t.Errorf("PKeyIndex(0x1234): %v, want ENOENT", err)
	}
	if _, err := ctx.QueryPKey(1, int(pa.PkeyTblLen)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPKey past the table: %v, want EINVAL", err)
	}
	if _, err := ctx.QueryPKey(0, 0); err == nil {
		t.Error("QueryPKey of port 0 succeeded")
	}
}

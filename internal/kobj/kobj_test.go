package kobj

import (
	"errors"
	"io"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

type closer struct {
	name  string
	order *[]string
}

func (c *closer) Close() error { *c.order = append(*c.order, c.name); return nil }

func TestTableTeardownOrder(t *testing.T) {
	var c Context
	var order []string
	add := func(k Kind, name string) uint64 {
		h, err := c.Track(k, &closer{name, &order})
		if err != nil || h == 0 {
			t.Fatalf("Track(%s): %d, %v", name, h, err)
		}
		return h
	}
	add(KindPD, "pd")
	add(KindMR, "mr")
	qp := add(KindQP, "qp")
	add(KindCQ, "cq")
	add(KindMW, "mw")
	gone := add(KindSRQ, "srq")
	c.Untrack(gone)
	if c.Count(KindSRQ) != 0 || c.Count(KindQP) != 1 {
		t.Fatalf("counts: srq %d, qp %d", c.Count(KindSRQ), c.Count(KindQP))
	}
	if o, ok := c.Object(qp).(*closer); !ok || o.name != "qp" {
		t.Fatalf("Object(%d) = %v", qp, c.Object(qp))
	}
	if c.Object(gone) != nil {
		t.Fatal("an untracked handle still maps to its object")
	}
	objs, ok := c.Close()
	if !ok || !c.Closed() {
		t.Fatal("Close did not close")
	}
	for _, o := range objs {
		o.Close()
	}
	want := []string{"mw", "qp", "cq", "mr", "pd"}
	if len(order) != len(want) {
		t.Fatalf("teardown %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("teardown %v, want %v", order, want)
		}
	}
	if _, ok := c.Close(); ok {
		t.Error("a second Close returned objects again")
	}
	if _, err := c.Track(KindPD, io.NopCloser(nil)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Track after Close: %v, want ErrClosed", err)
	}
}

type win struct{ io.Closer }

func (*win) Posted(bool, uint32) bool { return false }
func (*win) HeldQP() (uint32, bool)   { return 0, false }

func TestWindowsByRKeyIndex(t *testing.T) {
	var c Context
	w := &win{}
	c.AddWindow(0x12345600, w)
	// A bind changes only the key byte.
	if c.Window(0x123456ab) != w {
		t.Fatal("the window is not found under a rebound rkey")
	}
	if c.Window(0x12345700) != nil {
		t.Fatal("another index finds the window")
	}
	c.RemoveWindow(0x123456ff, &win{}) // someone else's: no effect
	if c.Window(0x12345600) != w {
		t.Fatal("removing another window dropped this one")
	}
	c.RemoveWindow(0x12345601, w)
	if c.Window(0x12345600) != nil {
		t.Fatal("the window is still registered after RemoveWindow")
	}
}

func TestChannelStashTake(t *testing.T) {
	var ch Channel
	ch.Stash(1, 2, 3)
	ch.Stash(2)
	even := func(h uint64) bool { return h%2 == 0 }
	for _, want := range []uint64{2, 2} {
		if h, ok := ch.Take(even); !ok || h != want {
			t.Fatalf("Take(even) = %d, %v; want %d", h, ok, want)
		}
	}
	if _, ok := ch.Take(even); ok {
		t.Fatal("Take found a handle that is not there")
	}
	any := func(uint64) bool { return true }
	for _, want := range []uint64{1, 3} {
		if h, ok := ch.Take(any); !ok || h != want {
			t.Fatalf("Take(any) = %d, %v; want %d (oldest first)", h, ok, want)
		}
	}
}

// Close shuts posting on every object before any is destroyed: when the
// first object is closed, all shuts have run, and each ran once.
func TestCloseShutsBeforeTeardown(t *testing.T) {
	var c Context
	var order []string
	for _, name := range []string{"qp1", "qp2", "srq"} {
		kind := KindQP
		if name == "srq" {
			kind = KindSRQ
		}
		h, err := c.Track(kind, &closer{name, &order})
		if err != nil {
			t.Fatal(err)
		}
		c.SetShut(h, func() { order = append(order, "shut "+name) })
	}
	if _, err := c.Track(KindCQ, &closer{"cq", &order}); err != nil {
		t.Fatal(err)
	}
	c.SetShut(12345, func() { t.Error("a shut registered for an unknown handle ran") })
	objs, ok := c.Close()
	if !ok {
		t.Fatal("Close did not close")
	}
	shuts := len(order)
	for _, o := range objs {
		o.Close()
	}
	if shuts != 3 {
		t.Fatalf("before teardown: %v, want the 3 shuts", order[:shuts])
	}
	for _, s := range order[:shuts] {
		if s[:5] != "shut " {
			t.Fatalf("order %v: an object closed before every shut ran", order)
		}
	}
	if len(order) != 7 {
		t.Fatalf("order %v: want 3 shuts and 4 closes", order)
	}
}

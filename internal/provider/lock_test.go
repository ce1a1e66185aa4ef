package provider

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// The lock excludes: a plain counter incremented under it from many
// goroutines ends exact (and -race sees the synchronization).
func TestLockExcludes(t *testing.T) {
	var l Lock
	n := 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if !l.Lock() {
					t.Error("open lock refused")
					return
				}
				n++
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 8*2000 {
		t.Fatalf("counter %d, want %d", n, 8*2000)
	}
}

// Closing waits for the holder and refuses everyone after, including
// goroutines already waiting.
func TestLockClose(t *testing.T) {
	var l Lock
	if !l.Lock() {
		t.Fatal("zero Lock refused")
	}
	refused := make(chan bool)
	go func() { refused <- !l.Lock() }()
	runtime.Gosched()
	l.CloseUnlock()
	if !<-refused {
		t.Fatal("a waiter got a closed lock")
	}
	if l.Lock() || !l.Closed() {
		t.Fatal("closed lock acquired")
	}
}

func TestErrorsShared(t *testing.T) {
	built := 0
	e := NewErrors(func(i int, r Reason) error {
		built++
		return fmt.Errorf("t: post: work request %d: reason %d", i, r)
	})
	a, b := e.Full(5), e.Full(5)
	if a != b {
		t.Fatal("Full(5) built twice")
	}
	if a.Error() != "t: post: work request 5: reason 3" {
		t.Fatalf("Full(5) = %v", a)
	}
	before := built
	if n := testing.AllocsPerRun(100, func() { _ = e.Full(5); _ = e.Closed(); _ = e.State() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if built != before {
		t.Fatalf("shared errors built again (%d times)", built-before)
	}
	if err := e.Full(fullCached + 3); err.Error() != "t: post: work request 1027: reason 3" {
		t.Fatalf("uncached index: %v", err)
	}
	if e.Closed().Error() != "t: post: work request 0: reason 1" || e.State().Error() != "t: post: work request 0: reason 2" {
		t.Fatalf("Closed %v, State %v", e.Closed(), e.State())
	}
	if err := e.At(7, ReasonNotCapable); err.Error() != "t: post: work request 7: reason 7" {
		t.Fatalf("At: %v", err)
	}
}

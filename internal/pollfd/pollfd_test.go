package pollfd

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

func pipe(t *testing.T) (*FD, int) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	fd, err := New(p[0], "pipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close(); unix.Close(p[1]) })
	return fd, p[1]
}

func TestReadWaitsAndWakes(t *testing.T) {
	fd, w := pipe(t)
	buf := make([]byte, 8)
	if n, err := fd.TryRead(buf); n != 0 || err != nil {
		t.Fatalf("TryRead on empty pipe: %d %v", n, err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := fd.Read(context.Background(), buf)
		done <- result{n, err}
	}()
	waitParked(t, "pollfd.(*FD).do(")
	unix.Write(w, []byte("x"))
	if r := <-done; r.n != 1 || r.err != nil {
		t.Fatalf("Read: %d %v", r.n, r.err)
	}
}

func TestReadCancelled(t *testing.T) {
	fd, w := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := fd.Read(ctx, make([]byte, 8))
		errc <- err
	}()
	waitParked(t, "pollfd.(*FD).do(")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Read: %v", err)
	}
	// The deadline used to interrupt must not poison the next read.
	unix.Write(w, []byte("y"))
	if n, err := fd.Read(context.Background(), make([]byte, 8)); n != 1 || err != nil {
		t.Fatalf("Read after cancel: %d %v", n, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := fd.Read(ctx, make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out Read: %v", err)
	}
}

func TestCloseUnblocks(t *testing.T) {
	fd, _ := pipe(t)
	errc := make(chan error)
	go func() {
		_, err := fd.Read(context.Background(), make([]byte, 8))
		errc <- err
	}()
	waitParked(t, "pollfd.(*FD).do(")
	fd.Close()
	err := <-errc
	if !errors.Is(err, uverbs.ErrClosed) || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read interrupted by Close: %v, want uverbs.ErrClosed (and os.ErrClosed)", err)
	}
}

// Every operation on a closed FD reports uverbs.ErrClosed, which is
// verbs.ErrClosed: users see one sentinel for closed objects.
func TestClosedIsUverbsErrClosed(t *testing.T) {
	fd, _ := pipe(t)
	fd.Close()
	ran := false
	errs := map[string]error{
		"Raw": fd.Raw(func(int) error { ran = true; return nil }),
		"Do":  fd.Do(context.Background(), func(int) error { ran = true; return nil }),
	}
	_, errs["TryRead"] = fd.TryRead(make([]byte, 1))
	_, errs["Read"] = fd.Read(context.Background(), make([]byte, 1))
	for op, err := range errs {
		if !errors.Is(err, uverbs.ErrClosed) || !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s on a closed FD: %v, want uverbs.ErrClosed (and os.ErrClosed)", op, err)
		}
	}
	if ran {
		t.Error("a function ran on the closed descriptor")
	}
	if n := fd.Int(); n != -1 {
		t.Errorf("Int of a closed FD: %d", n)
	}
}

// A wait that parks with a cancellable context allocates nothing once the
// context is registered: loops of waits with one long-lived context (the
// rdma_cm reader, cm's GetRecvComp, cq.Wait) stay allocation-free.
func TestWaitWithContextAllocatesNothing(t *testing.T) {
	fd, w := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	one := []byte{1}
	buf := make([]byte, 1)
	parks, calls := 0, 0
	// Allocated once, as the package comment asks of Do's function.
	fn := func(raw int) error {
		calls++
		if calls == 1 {
			// Nothing to read yet: make the fd readable, then report
			// EAGAIN so that Do parks on the netpoller until it wakes
			// for the new data.
			unix.Write(w, one)
			return unix.EAGAIN
		}
		_, err := unix.Read(raw, buf)
		return err
	}
	wait := func() {
		calls = 0
		if err := fd.Do(ctx, fn); err != nil {
			t.Fatal(err)
		}
		if calls == 2 {
			parks++
		}
	}
	wait() // registers ctx
	if n := testing.AllocsPerRun(100, wait); n != 0 {
		t.Errorf("a parked wait with a cancellable context: %v allocations", n)
	}
	if parks != 102 {
		t.Fatalf("%d of 102 waits went through the netpoller's wait", parks)
	}
	// The registration still ends the wait when ctx ends.
	errc := make(chan error, 1)
	go func() { errc <- fd.Do(ctx, func(int) error { return unix.EAGAIN }) }()
	waitParked(t, "pollfd.(*FD).do(")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a registered context cancelled: %v", err)
	}
}

// A context that ends while no wait uses it leaves a deadline behind;
// neither the next wait (with another context) nor TryRead may take it for
// their own.
func TestStaleContextDoesNotEndOtherWaits(t *testing.T) {
	fd, w := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	unix.Write(w, []byte("a"))
	if _, err := fd.Read(ctx, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("b"))
	cancel() // registered, idle: sets the deadline
	buf := make([]byte, 1)
	if n, err := fd.TryRead(buf); n != 1 || err != nil || buf[0] != 'b' {
		t.Fatalf("TryRead after an idle context ended: %d %v %q", n, err, buf)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := fd.Read(context.Background(), buf)
		errc <- err
	}()
	waitParked(t, "pollfd.(*FD).do(")
	unix.Write(w, []byte("c"))
	if err := <-errc; err != nil || buf[0] != 'c' {
		t.Fatalf("Read after an idle context ended: %v %q", err, buf)
	}
}

// waitParked waits until a goroutine whose stack contains fn is parked on
// the netpoller.
func waitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "runtime_pollWait") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine parked in %s:\n%s", fn, buf[:n])
		}
		runtime.Gosched()
	}
}

// Kick makes Do retry its function although the fd never became readable,
// and leaves no deadline behind for the next wait.
func TestKickRetriesDo(t *testing.T) {
	fd, w := pipe(t)
	var ready atomic.Bool
	errc := make(chan error, 1)
	go func() {
		errc <- fd.Do(context.Background(), func(int) error {
			if !ready.Load() {
				return unix.EAGAIN
			}
			return nil
		})
	}()
	waitParked(t, "pollfd.(*FD).do(")
	ready.Store(true)
	fd.Kick()
	if err := <-errc; err != nil {
		t.Fatalf("Do after Kick: %v", err)
	}
	// The next Do waits for real readiness again, and a cancelled one
	// still returns the context's error.
	buf := make([]byte, 1)
	go func() {
		errc <- fd.Do(context.Background(), func(raw int) error {
			_, err := unix.Read(raw, buf)
			return err
		})
	}()
	waitParked(t, "pollfd.(*FD).do(")
	unix.Write(w, []byte("z"))
	if err := <-errc; err != nil || buf[0] != 'z' {
		t.Fatalf("Do after a kicked Do: %v %q", err, buf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := fd.Do(ctx, func(int) error { return unix.EAGAIN }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Do: %v", err)
	}
}

// A context that ends between Read's look at it and its wait ends the
// wait, even when the deadline its end set was cleared in between (Read's
// first TryRead clears a deadline it finds). rsocket's Conn cancels the
// context its blocked call waits with to wake it; before the fix this
// interleaving left the call parked until the next event, and Close,
// waiting for it, hung (x/net/nettest's ConcurrentMethods once did).
// The test runs Read's steps one by one to force the interleaving.
func TestContextEndedBeforeWaitEndsIt(t *testing.T) {
	fd, w := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A wait that parks registers ctx; data ends it, and the
	// registration stays for the next wait with ctx.
	first := make(chan error, 1)
	go func() {
		_, err := fd.Read(ctx, make([]byte, 1))
		first <- err
	}()
	waitParked(t, "pollfd.(*FD).do(")
	unix.Write(w, []byte("a"))
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Read(ctx): ctx is live when Read looks; then it ends and its
	// registration sets the deadline.
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(60 * time.Second)
	for fd.rc.Read(func(uintptr) bool { return true }) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the ended context's registration set no deadline")
		}
		runtime.Gosched()
	}
	// Read's TryRead finds the deadline and clears it; nothing to read.
	if n, err := fd.TryRead(make([]byte, 1)); n != 0 || err != nil {
		t.Fatalf("TryRead: %d %v", n, err)
	}
	// Read's wait must see that ctx has ended.
	errc := make(chan error, 1)
	go func() {
		fd.opMu.Lock()
		defer fd.opMu.Unlock()
		fd.setBuf(1)
		errc <- fd.do(ctx, fd.readFn)
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("wait with an ended context: %v, want context.Canceled", err)
		}
	case <-time.After(60 * time.Second):
		fd.Close() // lets the parked wait go
		t.Fatal("a wait with an ended context parked (still waiting after 60 s)")
	}
}

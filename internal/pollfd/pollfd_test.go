package pollfd

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(w, []byte("x"))
	}()
	n, err := fd.Read(context.Background(), buf)
	if n != 1 || err != nil {
		t.Fatalf("Read: %d %v", n, err)
	}
}

func TestReadCancelled(t *testing.T) {
	fd, w := pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	if _, err := fd.Read(ctx, make([]byte, 8)); !errors.Is(err, context.Canceled) {
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
	time.Sleep(20 * time.Millisecond)
	fd.Close()
	if err := <-errc; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
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
	time.Sleep(20 * time.Millisecond) // let Do park (it also works if not)
	ready.Store(true)
	fd.Kick()
	if err := <-errc; err != nil {
		t.Fatalf("Do after Kick: %v", err)
	}
	// The next Do waits for real readiness again, and a cancelled one
	// still returns the context's error.
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(w, []byte("z"))
	}()
	buf := make([]byte, 1)
	if err := fd.Do(context.Background(), func(raw int) error {
		_, err := unix.Read(raw, buf)
		return err
	}); err != nil || buf[0] != 'z' {
		t.Fatalf("Do after a kicked Do: %v %q", err, buf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := fd.Do(ctx, func(int) error { return unix.EAGAIN }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Do: %v", err)
	}
}

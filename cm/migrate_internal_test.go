package cm

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// MIGRATE_ID moves the ID's unread events to the new file without waking
// anyone who waits on it. The new channel's reader must look anyway, or
// an event that was pending at the move is never delivered.
func TestMigrateDeliversPendingEvents(t *testing.T) {
	addr := testutil.Addr(t) // skips on a bare host, fails in the VM
	from, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	// Stop from's reader, so the next event of its ID stays in the
	// kernel's queue of from's file.
	from.stop()
	<-from.done
	id, err := from.CreateID(TCP)
	if err != nil {
		t.Fatal(err)
	}
	// ADDR_RESOLVED will stay queued on from's file.
	sendResolve(t, id, addr)
	pfd := []unix.PollFd{{Fd: int32(from.FD()), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 60_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			t.Fatalf("waiting for the event: %d %v", n, err)
		}
		break
	}
	if err := id.Migrate(to); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := id.expect(ctx, EventAddrResolved); err != nil {
		t.Fatalf("the event pending at the migration: %v", err)
	}
}

// An event the old channel's reader has taken but not yet dispatched when
// Migrate runs still reaches the ID.
func TestMigrateWhileDispatching(t *testing.T) {
	addr := testutil.Addr(t)
	taken, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookEventRead = func() {
		once.Do(func() {
			close(taken)
			<-release
		})
	}
	from, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	to, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		from.Close()
		to.Close()
		testHookEventRead = nil
	})
	id, err := from.CreateID(TCP)
	if err != nil {
		t.Fatal(err)
	}
	sendResolve(t, id, addr)
	<-taken // from's reader holds ADDR_RESOLVED, undelivered
	migrated := make(chan error, 1)
	go func() { migrated <- id.Migrate(to) }()
	// Give Migrate the chance to overtake the dispatch (it must wait for
	// it); the test passes either way it is scheduled.
	select {
	case err := <-migrated:
		migrated <- err
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-migrated; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := id.expect(ctx, EventAddrResolved); err != nil {
		t.Fatalf("the event taken during the migration: %v", err)
	}
}

// sendResolve sends RESOLVE_ADDR for id without waiting for its event.
func sendResolve(t *testing.T, id *ID, addr string) {
	t.Helper()
	req := uverbs.UcmResolveAddr{Id: id.handle, Timeout_ms: 2000}
	var err error
	if req.Dst_addr, req.Dst_size, err = sockaddr(netip.AddrPortFrom(netip.MustParseAddr(addr), 7)); err != nil {
		t.Fatal(err)
	}
	if err := ucma(id, "RESOLVE_ADDR", uverbs.RDMA_USER_CM_CMD_RESOLVE_ADDR, &req, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// Migrate fails, and moves nothing, when a channel's file is closed: the
// kernel never saw MIGRATE_ID.
func TestMigrateWithClosedFD(t *testing.T) {
	testutil.Device(t) // skips on a bare host, fails in the VM
	for _, side := range []string{"old", "new"} {
		from, err := NewChannel()
		if err != nil {
			t.Fatal(err)
		}
		to, err := NewChannel()
		if err != nil {
			t.Fatal(err)
		}
		id, err := from.CreateID(TCP)
		if err != nil {
			t.Fatal(err)
		}
		closed := from
		if side == "new" {
			closed = to
		}
		closed.fd.Close()
		<-closed.done
		if err := id.Migrate(to); !errors.Is(err, ErrClosed) {
			t.Errorf("migrating with the %s channel's fd closed: %v, want ErrClosed", side, err)
		}
		if id.Channel() != from {
			t.Errorf("%s fd closed: the ID moved to the new channel", side)
		}
		for name, ch := range map[string]*Channel{"old": from, "new": to} {
			ch.mu.Lock()
			got := ch.ids[id.uid] == id
			ch.mu.Unlock()
			if want := name == "old"; got != want {
				t.Errorf("%s fd closed: the ID registered with the %s channel: %v, want %v", side, name, got, want)
			}
		}
		// Closing reports the closed fd; what matters is that nothing hangs.
		from.Close()
		to.Close()
	}
}

// Migrate, commands, Channel and Close on one ID from several goroutines:
// no data race (run with -race), every command reaches the channel the ID
// is on (the kernel answers EINVAL to a command on another channel's
// file), and the closed ID is left in no channel's table.
func TestMigrateConcurrentWithUse(t *testing.T) {
	dev := testutil.Device(t)
	base := testutil.Resources(t, dev)["cm_id"]
	a, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 20 {
		id, err := a.CreateID(TCP)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			for j := range 6 {
				to := b
				if j%2 == 1 {
					to = a
				}
				if err := id.Migrate(to); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("migrate: %v", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 6 {
				if ch := id.Channel(); ch != a && ch != b {
					t.Errorf("Channel: %p", ch)
				}
				if _, err := id.Query(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("query during migrations: %v", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := id.Query(); err != nil {
				t.Errorf("query: %v", err)
			}
			if err := id.Close(); err != nil {
				t.Errorf("close during migrations: %v", err)
			}
		}()
		wg.Wait()
		for name, ch := range map[string]*Channel{"a": a, "b": b} {
			ch.mu.Lock()
			_, ok := ch.ids[id.uid]
			ch.mu.Unlock()
			if ok {
				t.Errorf("closed ID still in channel %s's table", name)
			}
		}
	}
	if got := testutil.Resources(t, dev)["cm_id"]; got != base {
		t.Errorf("cm_id count %d after closing every ID, before %d", got, base)
	}
}

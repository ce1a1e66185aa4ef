package cm

import (
	"context"
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

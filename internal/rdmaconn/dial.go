package rdmaconn

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/internal/cmaddr"
)

// NewID opens a CM channel and creates a TCP-port-space ID on it. On
// failure nothing is left open.
func NewID() (*cm.Channel, *cm.ID, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		return nil, nil, err
	}
	id, err := ch.CreateID(cm.TCP)
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	return ch, id, nil
}

// Resolve opens the active side's channel and ID and resolves the
// address (from src, if valid, to dst) and the route, each step tried
// again on a timeout as cmaddr.Retry does (retries more times, within
// ctx). On failure nothing is left open.
func Resolve(ctx context.Context, src, dst netip.AddrPort, retries int) (*cm.Channel, *cm.ID, error) {
	ch, id, err := NewID()
	if err != nil {
		return nil, nil, err
	}
	err = cmaddr.Retry(ctx, retries, func(ctx context.Context) error { return id.ResolveAddr(ctx, src, dst) })
	if err == nil {
		err = cmaddr.Retry(ctx, retries, id.ResolveRoute)
	}
	if err != nil {
		id.Close()
		ch.Close()
		return nil, nil, err
	}
	return ch, id, nil
}

// ConnectErrno wraps a failed connect in the errno a socket's connect
// sets (librdmacm's ucma_complete): ECONNREFUSED for a rejection, else
// the failure event's negative status (siw's CONNECT_ERROR -22 is
// EINVAL).
func ConnectErrno(err error) error {
	if errors.Is(err, cm.ErrRejected) {
		return fmt.Errorf("%w (%w)", syscall.ECONNREFUSED, err)
	}
	var ee *cm.EventError
	if errors.As(err, &ee) && ee.Status < 0 && !errors.As(err, new(syscall.Errno)) {
		return fmt.Errorf("%w (%w)", syscall.Errno(-ee.Status), err)
	}
	return err
}

// Migrate moves a connection request's ID to a channel of its own, so
// that the connection outlives the Listener (librdmacm does the same for
// rdma_get_request's IDs). On failure it rejects the request and closes
// id.
func Migrate(id *cm.ID) (*cm.Channel, error) {
	ch, err := cm.NewChannel()
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	if err := id.Migrate(ch); err != nil {
		id.Reject(nil)
		id.Close()
		ch.Close()
		return nil, err
	}
	return ch, nil
}

// Accept accepts the request on id with p and waits until the
// connection is established, within ctx and AcceptTimeout.
func Accept(ctx context.Context, id *cm.ID, p cm.ConnParam) error {
	ctx, cancel := context.WithTimeout(ctx, AcceptTimeout)
	defer cancel()
	return id.Accept(ctx, p)
}

package cm

import (
	"context"
	"fmt"
)

// ends reports whether an event ends the ID's connection, or the attempt
// to make one, for Done.
func ends(t EventType) bool {
	switch t {
	case EventDisconnected, EventDeviceRemoval, EventRejected, EventUnreachable, EventConnectError:
		return true
	}
	return false
}

// endLocked records why the connection ended, once, and closes Done's
// channel if anyone has asked for it. The caller holds id.mu.
func (id *ID) endLocked(err error) {
	if id.doneErr != nil {
		return
	}
	id.doneErr = err
	if id.done != nil {
		close(id.done)
	}
}

// Done returns a channel that is closed when the ID's connection is over:
// when the ID receives EventDisconnected (the peer disconnected, or
// answered this side's Disconnect), EventDeviceRemoval, or, for a
// connection still being made, EventRejected, EventUnreachable or
// EventConnectError; and when the ID is closed. Err then says which. It
// watches the events as they arrive, whoever reads them (Event, Connect,
// Accept), so no goroutine of the caller's has to wait for a peer's
// disconnect: select on Done beside the work. A listening ID's channel
// closes only with device removal or Close.
func (id *ID) Done() <-chan struct{} {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.done == nil {
		id.done = make(chan struct{})
		if id.doneErr != nil {
			close(id.done)
		}
	}
	return id.done
}

// Err returns nil while Done is open, and why it closed afterwards: the
// *EventError of the event that ended the connection (errors.Is(err,
// ErrDisconnected), ErrRejected or ErrUnreachable holds), or ErrClosed
// if Close came first.
func (id *ID) Err() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.doneErr
}

// DisconnectContext is Disconnect that also waits until the disconnect is
// complete, or ctx ends: until this side's EventDisconnected arrives and
// Done is closed. The wait for the sends already posted to leave is
// bounded by ctx too, and by 2 s. The ID stays open: Close it afterwards.
//
// It is also the way to answer a peer's disconnect: when Done closes with
// errors.Is(Err(), ErrDisconnected), DisconnectContext sends the reply the
// peer's own DisconnectContext waits for, and returns nil at once (this
// side's EventDisconnected has arrived). Once a connection ended in a
// disconnect, whichever side began it, DisconnectContext returns nil.
//
// Started first, it returns when the peer answers (its DisconnectContext,
// Disconnect or Close) or, if it never does, when the connection manager
// gives up on it (InfiniBand and RoCE: the DREQ's retries, tens of
// seconds). It fails at once, without waiting, on an ID that has no
// connection to end: one that never connected, or whose attempt was
// rejected or failed (Err says which), and with ErrClosed after Close.
func (id *ID) DisconnectContext(ctx context.Context) error {
	if err := id.check(); err != nil {
		return err
	}
	drain, cancel := context.WithTimeout(ctx, sendDrainTimeout)
	err := id.disconnect(drain)
	cancel()
	if err != nil {
		return err
	}
	select {
	case <-id.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cm: waiting for the disconnect to complete: %w", ctx.Err())
	}
}

// Package valkeyrdma is Valkey's RDMA transport (valkey-server 8.0 and
// later, built with BUILD_RDMA) as a net.Conn: a Go Valkey or Redis
// client that takes a dialer runs over RDMA with it, without cgo.
//
//	c, err := valkeyrdma.Dial(ctx, "tcp", "169.254.77.1:6379")
//	...
//	_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
//
// valkey-go takes it through ClientOption.DialCtxFn:
//
//	client, err := valkey.NewClient(valkey.ClientOption{
//		InitAddress: []string{"169.254.77.1:6379"},
//		DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
//			return valkeyrdma.Dial(ctx, "tcp", addr)
//		},
//	})
//
// go-redis the same way, through Options.Dialer:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr: "169.254.77.1:6379",
//		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
//			return valkeyrdma.Dial(ctx, "tcp", addr)
//		},
//	})
//
// examples/valkey is a whole program. Listen is the server side, for a
// Go program serving RESP to Valkey's C client (or to Dial); it sets up
// each connection in a goroutine of its own.
//
// # Protocol
//
// As valkey 8.1.1's src/rdma.c speaks it. A connection is an rdma_cm
// connection in the TCP port space with no private data. Each side
// registers an RX buffer (1 MiB by default) the peer may RDMA-write, and
// announces it with a control message, RegisterXferMemory (its address,
// length and key), once the connection is established. Control messages
// are 32-byte SENDs (big-endian fields; opcodes GetServerFeature,
// SetClientFeature, Keepalive, RegisterXferMemory); every receive posted
// carries a 32-byte slot for one. Data, the RESP stream unchanged, goes
// by RDMA WRITE WITH IMMEDIATE into the peer's RX buffer at the offset
// this side has reached, the immediate its length; the receiver adds the
// length to its own offset. When a sender has filled the peer's buffer
// it waits; the receiver announces the same buffer again once its
// application has read all of it, and both restart at offset 0. So a
// writer fills the buffer exactly: a Write is cut at the buffer's end.
//
// Valkey's server accepts with an RNR retry count of 0: a WRITE WITH
// IMMEDIATE or a SEND that finds no receive posted ends the connection.
// A Conn re-posts every receive as soon as its completion is polled,
// and a goroutine polls after every completion event, so receives are
// re-posted whether or not the application reads (1024 posted, the
// depth of the peer's send queue).
//
// A dialed Conn asks the server for its features (GetServerFeature;
// PeerFeatures has the answer: none in 8.1) and answers none when asked
// as a server. Each side sends a Keepalive every 3 s (the Keepalive
// option); a peer that no longer answers fails the send once the RC
// retries (6, where Valkey's client asks for 7, which rxe takes as
// infinite) have run out, and the connection with it, which ends
// blocked calls: in the TCG bed (rxe, 6.12), a Read blocked on a peer
// made silent failed with ETIMEDOUT about 6 s later, with a 100 ms
// keepalive. The peer's disconnect (rdma_disconnect,
// which is how Valkey closes: it has no goodbye message) reaches a Conn
// as the CM's DISCONNECTED or as flushed receives: Read then returns
// the data that came before and io.EOF, Write fails with ECONNRESET.
//
// The transport has no half-close, so Conn has no CloseWrite.
//
// # iWARP
//
// The transport cannot run on iWARP devices (siw): all data goes by RDMA
// WRITE WITH IMMEDIATE, which iWARP does not have, and Valkey's server
// relies on its peer's receives being posted (RNR retry count 0), where
// iWARP has no RNR retry at all. Dial fails, and a Listener refuses
// connections, with an error wrapping verbs.ErrNotCapable on an iWARP
// device. (rsocket's iWARP variant, a WRITE and a SEND per message, would
// need a server that speaks it.)
//
// # Blocking
//
// A Read or Write that cannot proceed polls the CQ a few times, yielding
// between polls, then sleeps until woken. A goroutine per connection,
// started with it, keeps the CQ armed and waits on the completion
// channel (parked on Go's netpoller); after each completion event it
// processes the completions, re-posts the receives they consumed, and
// wakes the calls whose condition then holds. Deadlines and Close wake
// them too.
package valkeyrdma

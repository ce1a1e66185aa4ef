// Package rsocket is a stream connection over RDMA that speaks
// librdmacm's rsocket protocol: a Conn is a net.Conn and a Listener a
// net.Listener, and either end may be a C program on librdmacm's rsockets
// (rstream, riostream, rcopy, or anything preloading librspreload) as
// shipped with rdma-core 44 (Debian 12).
//
//	l, err := rsocket.Listen("tcp", "169.254.77.1:7471")
//	...
//	c, err := l.Accept()
//
//	c, err := rsocket.Dial(ctx, "tcp", "169.254.77.1:7471")
//	_, err = c.Write(msg)
//
// A runnable server and client are the package's Example
// (example_test.go; pkg.go.dev shows it, go doc does not), which runs on
// rxe0's address in the test bed (hack/vm).
//
// The package is named for the protocol, which is what users of
// librdmacm know it by, and to leave the names rstream, riostream and
// rcopy to the tools built on it.
//
// # Protocol
//
// A connection is an rdma_cm connection in the TCP port space whose
// connect request and reply carry rsocket's 40-byte private data
// (version 1, flags, the credits, the address and key of the side's
// target SGL and of the first half of its receive buffer, its iomap
// size). Every stream message is an RDMA WRITE WITH IMMEDIATE (on
// iWARP a WRITE and a SEND: see below); the immediate's top three bits
// say what it is:
//
//   - data: the bytes written into the receive buffer half the peer
//     published, at most 64 KiB per message;
//   - an SGL update: the new credit limit, and (in the same write) the
//     next free half of the receiver's buffer, written into the sender's
//     target SGL;
//   - an iomap update: a window of memory the peer may write directly;
//   - control: shutdown of the sending side, or disconnect.
//
// The receiver reads its buffer as a ring in arrival order and grants
// credits (ReceiveQueueSize messages, two halves of ReceiveBufferSize
// bytes) as the application reads. Control messages use four slots of
// their own. Keepalives are zero-length RDMA WRITEs without immediate.
// The package matches rdma-core 44's limits: queues of 16 to 65534
// entries (capped at the device's), messages of 2 KiB growing to 64 KiB
// within one Write, four control messages in flight.
//
// # Zero-copy writes
//
// Conn.IOMap, Conn.IOWrite and Conn.IOUnmap are riomap, riowrite and
// riounmap: one side maps a buffer of its own at an offset of its
// choosing, the mapping reaches the peer with the side's next Write, and
// the peer's IOWrite then RDMA-WRITEs into it by offset, without the
// application being told (it says so in-band, as riostream does with the
// buffer's last byte). A side can hold as many of the peer's mappings as
// its IOMapSize option allows (0 by default, as in C).
//
// A peer that breaks the protocol (bad private data, an unknown message,
// more data or messages than it was granted) fails the connection with
// an error wrapping ErrProtocol; nothing it sends makes this side access
// memory outside the connection's buffers.
//
// # iWARP
//
// iWARP devices (siw) have no WRITE WITH IMMEDIATE. There, as C's
// rsocket does (RS_OPT_MSG_SEND, chosen by the transport the device
// reports), a message with a payload is a plain RDMA WRITE of it
// followed by a 4-byte inline SEND of the message word (what the
// immediate would be, in the sender's byte order), and a message
// without one is the SEND alone; each receive has a 4-byte slot after
// the receive buffer; a data message takes two send queue slots and an
// SGL update with a buffer two control slots; the dialer asks for
// initiator depth 1. The completion of such a SEND does not say how many
// bytes the WRITE before it placed, so on iWARP a data message's length
// is taken from its word (unchecked, as in C) and an SGL update carries
// a buffer when the target SGL entry it fills holds one. iWARP lets the
// passive side send only after the active side's first message (MPA
// without peer-to-peer mode, as on siw): an accepted connection on an
// iWARP device posts nothing until then (C sends its first credit
// update with its application's first call, whenever that is).
//
// Checked on siw (Debian 12's 6.12 kernel, rdma-core 44's tools in the
// test VM), where both ends speak this variant: rstream's custom tests
// with -T v (every byte checked) Go server against C client, C server
// against Go client and Go against Go, blocking, non-blocking and async,
// messages from 64 bytes to 1.5 MiB and beyond the buffers; riostream
// (iomap updates and riowrite) and rcopy the same three ways; C's
// in-band shutdown and disconnect, a C peer killed mid-transfer
// (ECONNRESET), C's and Go's version reject, and the package's own
// connection tests. What the Go side decoded from C's message words is
// logged and partly checked there: data messages, SGL updates with a
// buffer and credit-only ones (both kinds, both directions, in the
// 64-byte case), the iomap update riostream sends, and C's in-band
// disconnect. As in C, iWARP has no RNR retry: a message that finds no
// receive posted ends the connection (siw terminates it), and receives
// are re-posted only when the application's calls (or the keepalive)
// poll, so a peer's control messages beyond the posted receives, while
// this side's application neither reads nor writes, can end it.
//
// # Where this side differs from C (none of it changes the wire format)
//
//   - The receive buffer's second half is published when the connection
//     is set up; C publishes it with its application's first call.
//   - Credits are granted as soon as Read has consumed enough, not at the
//     next call that polls.
//   - An iomap update is counted as a consumed credit, so the peer gets
//     it back; C's receiver never returns it.
//   - IOWrite waits for send-queue and buffer room only; C's riowrite also
//     waits for a data credit and receive space it does not use.
//   - The RC retry count asked for is 6, not 7: rxe never counts 7 down,
//     so a peer whose host died would never fail the connection.
//   - On iWARP an accepted connection sends nothing before the active
//     side's first message (C sends its first credit update with its
//     application's first call), asks for at least 4 bytes of inline
//     data (C fails with ENOTSUP when the device grants fewer than the
//     size asked for), and reports a flushed request as ECONNRESET (the
//     peer's end of the TCP stream went away; C says EIO).
//   - Peer messages are checked: a reserved operation, an unknown control
//     message, more data or messages than granted, or an SGL update that
//     overwrites an entry still in use fail the connection (C queues
//     reserved operations as data and trusts the rest).
//
// # Blocking
//
// A Read or Write that cannot proceed first polls the connection's CQ for
// PollTime (10 µs by default, C's polling_time), then waits on its
// completion channel (cq.Wait), parked on Go's netpoller; deadlines, Close
// and the peer's disconnect wake them. Once a connection runs, Read and Write allocate nothing.
// Reads and Writes that never wait yield to the scheduler every 64 calls
// or 256 KiB or so, so that the runtime has no need to preempt a busy
// transfer by signal.
// Like C's rsocket, a side grants credits only while its application
// calls Read (or Write): a peer that stops reading stops the writer.
package rsocket

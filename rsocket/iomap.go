package rsocket

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// Zero-copy writes (rsocket's iomap): a side maps a buffer of its own at
// an offset it chooses (IOMap, C's riomap with PROT_WRITE); the mapping
// travels to the peer with this side's next Write or IOWrite, into one
// entry of the peer's iomap table (the peer's IOMapSize option says how
// many it has); the peer then writes straight into the buffer with
// IOWrite (riowrite), by offset, with plain RDMA WRITEs that this side
// never hears of: applications say in-band when the data is there (as
// riostream does with the buffer's last byte).

// iomapping is one of our buffers mapped for the peer's IOWrite.
type iomapping struct {
	mr     *mr.MR
	buf    []byte
	offset uint64
	index  int // the entry of the peer's table it goes into
}

// ErrNoIOMap is the error of IOMap when the peer's iomap table has no
// free entry (C: ENOMEM), and of IOWrite when no window of the peer's
// covers the offset.
var ErrNoIOMap = errors.New("rsocket: no iomap entry")

// IOMap maps buf for the peer's IOWrite: offsets [offset,
// offset+len(buf)) address it (riomap(buf, len, PROT_WRITE, 0, offset)).
// buf is registered with the device and must stay where it is, untouched
// by anything but the peer's writes and this side's reads, until IOUnmap
// (memory from mr.Alloc is the safe choice; never a goroutine's stack).
// The mapping goes to the peer with this side's next Write or IOWrite,
// and takes one of the entries of the peer's iomap table: with none
// free, or a peer that allows none, IOMap fails with ErrNoIOMap.
//
// C's rsocket does not check mappings for overlap, and neither does this.
func (c *Conn) IOMap(buf []byte, offset uint64) error {
	if len(buf) == 0 || uint64(len(buf)) > 1<<32-1 {
		return c.opError("iomap", fmt.Errorf("buffer of %d bytes: %w", len(buf), syscall.EINVAL))
	}
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return c.opError("iomap", net.ErrClosed)
	}
	idx := -1
	if c.maps == nil {
		c.maps = make([]*iomapping, c.s.remoteMap.Length)
	}
	for i, m := range c.maps {
		if m == nil {
			idx = i
			break
		}
	}
	c.mu.Unlock()
	if idx < 0 {
		return c.opError("iomap", fmt.Errorf("%w: the peer's table has %d entries, all in use", ErrNoIOMap, len(c.maps)))
	}
	m, err := mr.Register(c.pd, buf, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		return c.opError("iomap", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maps[idx] = &iomapping{mr: m, buf: buf, offset: offset, index: idx}
	c.mapQueue = append(c.mapQueue, c.maps[idx])
	return nil
}

// IOUnmap ends the mapping of buf, which IOMap mapped (riounmap). Like
// C, it tells the peer nothing: its entry goes stale, and an IOWrite of
// the peer's into it fails the connection (a remote access error).
func (c *Conn) IOUnmap(buf []byte) error {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return c.opError("iounmap", net.ErrClosed)
	}
	var m *iomapping
	for i, x := range c.maps {
		if x != nil && len(x.buf) == len(buf) && unsafe.SliceData(x.buf) == unsafe.SliceData(buf) {
			m = x
			c.maps[i] = nil
			break
		}
	}
	for i, x := range c.mapQueue {
		if x == m {
			c.mapQueue = append(c.mapQueue[:i], c.mapQueue[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if m == nil {
		return c.opError("iounmap", fmt.Errorf("buffer not mapped: %w", syscall.EINVAL))
	}
	if err := m.mr.Close(); err != nil {
		return c.opError("iounmap", err)
	}
	return nil
}

// sendIOMaps sends the mappings IOMap queued (rs_send_iomaps), each once
// a message may be sent, for the writing call op. The caller holds
// writeMu and c.mu.
func (c *Conn) sendIOMaps(op string) error {
	for len(c.mapQueue) > 0 {
		if err := c.awaitPost(op, condWrite); err != nil {
			return err
		}
		m := c.mapQueue[0]
		c.mapQueue = c.mapQueue[1:]
		iomapEntry{Offset: m.offset, SGE: sge{Addr: m.mr.IOVA(), Key: m.mr.RKey(), Length: uint32(len(m.buf))}}.put(c.mapBuf[:], c.s.peerOrder)
		c.post(c.s.nextIOMap(m.index), c.mapBuf[:], verbs.WRRDMAWriteWithImm)
	}
	return nil
}

// IOWrite writes p straight into the peer's memory at offset, into a
// window the peer mapped with IOMap (riowrite): RDMA WRITEs without
// immediate, which the peer's application does not see arrive. It
// returns when everything is posted; with no window covering the next
// offset it stops there and returns ErrNoIOMap. Like Write, it first
// sends this side's pending IOMap mappings, honours the write deadline,
// and serializes with Write.
func (c *Conn) IOWrite(p []byte, offset uint64) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.sendIOMaps("iowrite"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, c.writeOver("iowrite")
	}
	n := 0
	olen := olapStartSize
	for n < len(p) {
		if err := c.awaitPost("iowrite", condDirect); err != nil {
			return n, err
		}
		off := offset + uint64(n)
		e, ok := c.s.findIOMap(off)
		if !ok {
			c.progress() // a mapping may have just arrived
			if e, ok = c.s.findIOMap(off); !ok {
				return n, c.opError("iowrite", fmt.Errorf("%w covers offset %d", ErrNoIOMap, off))
			}
		}
		ch := c.s.nextDirect(len(p)-n, &olen, e, off)
		c.post(ch, p[n:n+ch.n], verbs.WRRDMAWrite)
		n += ch.n
	}
	return n, nil
}

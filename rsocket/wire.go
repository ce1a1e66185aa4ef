package rsocket

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants of librdmacm's rsocket.c (rdma-core v44.0, lines
// 63-70 and 201-233). The names are C's, without the RS_ prefix.
const (
	olapStartSize = 2048         // RS_OLAP_START_SIZE: the first chunk of a write
	maxTransfer   = 65536        // RS_MAX_TRANSFER: the largest chunk
	sndLowat      = 2048         // RS_SNDLOWAT: send-buffer room needed to send
	qpMinSize     = MinQueueSize // RS_QP_MIN_SIZE
	qpMaxSize     = MaxQueueSize // RS_QP_MAX_SIZE
	qpCtrlSize    = 4            // RS_QP_CTRL_SIZE: control messages in flight
	sglSize       = 2            // RS_SGL_SIZE: entries of the target SGL
	connRetries   = 6            // RS_CONN_RETRIES: address and route resolution

	sgeSize      = 16 // struct rs_sge
	iomapSize    = 24 // struct rs_iomap
	connDataSize = 40 // struct rs_conn_data
	maxCtrlMsg   = sgeSize
	msgSize      = 4 // RS_MSG_SIZE: the message word a SEND carries on iWARP
)

// Message operations: the top three bits of the immediate (rsocket.c
// 155-164). opWrite never travels (it tags riowrite's work requests);
// 1, 3 and 5 are reserved.
const (
	opData     = 0
	opWrite    = 2
	opSGL      = 4
	opIOMapSGL = 6
	opCtrl     = 7
)

// Control codes carried by opCtrl (rsocket.c 178-182). rsocket's
// keepalive is a plain zero-length RDMA WRITE and never carries
// ctrlKeepalive in an immediate.
const (
	ctrlDisconnect = 0
	ctrlKeepalive  = 1
	ctrlShutdown   = 2
)

// Flags of rs_conn_data.
const (
	connFlagNet   = 1 << 0 // the sender is big-endian
	connFlagIOMap = 1 << 1 // the sender's target SGL is followed by its iomap table
)

// msg builds an immediate: op in bits 31:29, data in 28:0.
func msg(op, data uint32) uint32 { return op<<29 | data&0x1FFFFFFF }

// msgOp and msgData split an immediate.
func msgOp(imm uint32) uint32   { return imm >> 29 }
func msgData(imm uint32) uint32 { return imm & 0x1FFFFFFF }

// sge is struct rs_sge: a remote buffer. On the wire the key comes
// before the length.
type sge struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// order is a byte order, as a concrete type (an interface would make the
// slices handed to it escape to the heap on the data path).
type order bool

const (
	littleEndian order = false
	bigEndian    order = true
)

func (o order) putUint64(b []byte, v uint64) {
	if o == bigEndian {
		binary.BigEndian.PutUint64(b, v)
	} else {
		binary.LittleEndian.PutUint64(b, v)
	}
}

func (o order) putUint32(b []byte, v uint32) {
	if o == bigEndian {
		binary.BigEndian.PutUint32(b, v)
	} else {
		binary.LittleEndian.PutUint32(b, v)
	}
}

func (o order) uint64(b []byte) uint64 {
	if o == bigEndian {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

func (o order) uint32(b []byte) uint32 {
	if o == bigEndian {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (o order) String() string {
	if o == bigEndian {
		return "big endian"
	}
	return "little endian"
}

// put writes s in the byte order o (the receiver's: rsocket RDMA-writes
// SGL and iomap entries in the order of the host that owns the memory).
func (s sge) put(b []byte, o order) {
	o.putUint64(b[0:8], s.Addr)
	o.putUint32(b[8:12], s.Key)
	o.putUint32(b[12:16], s.Length)
}

func getSGE(b []byte, o order) sge {
	return sge{Addr: o.uint64(b[0:8]), Key: o.uint32(b[8:12]), Length: o.uint32(b[12:16])}
}

// iomapEntry is struct rs_iomap: a window of the peer's memory that
// IOWrite may write, addressed by offset.
type iomapEntry struct {
	Offset uint64
	SGE    sge
}

func (e iomapEntry) put(b []byte, o order) {
	o.putUint64(b[0:8], e.Offset)
	e.SGE.put(b[8:24], o)
}

func getIOMapEntry(b []byte, o order) iomapEntry {
	return iomapEntry{Offset: o.uint64(b[0:8]), SGE: getSGE(b[8:24], o)}
}

// connData is struct rs_conn_data, the private data of the CM REQ and
// REP (rsocket.c 225-233). It always travels big-endian.
type connData struct {
	Version   uint8
	Flags     uint8
	Credits   uint16 // the sender's receive queue size
	IOMapSize uint8  // the sender's iomap slots, scaled (scaleIOMap)
	TargetSGL sge    // the sender's target SGL; Length counts entries
	DataBuf   sge    // the first half of the sender's receive buffer
}

// ErrProtocol is wrapped by every error that reports a peer breaking the
// rsocket protocol: malformed private data, an unknown message, more data
// or messages than it was granted. The connection is unusable after it.
var ErrProtocol = errors.New("rsocket: protocol violation")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// marshal returns the 40 bytes of d.
func (d *connData) marshal() [connDataSize]byte {
	var b [connDataSize]byte
	b[0] = d.Version
	b[1] = d.Flags
	binary.BigEndian.PutUint16(b[2:4], d.Credits)
	// b[4:7] reserved
	b[7] = d.IOMapSize
	d.TargetSGL.put(b[8:24], bigEndian)
	d.DataBuf.put(b[24:40], bigEndian)
	return b
}

// parseConnData decodes the private data of a connect request or
// response. The kernel pads private data to the CM message's size, so b
// may be longer than 40 bytes; the rest is ignored, as C does.
func parseConnData(b []byte) (connData, error) {
	if len(b) < connDataSize {
		return connData{}, protocolError("private data of %d bytes, want at least %d", len(b), connDataSize)
	}
	d := connData{
		Version:   b[0],
		Flags:     b[1],
		Credits:   binary.BigEndian.Uint16(b[2:4]),
		IOMapSize: b[7],
		TargetSGL: getSGE(b[8:24], bigEndian),
		DataBuf:   getSGE(b[24:40], bigEndian),
	}
	if d.Version != 1 {
		return d, protocolError("rsocket version %d, want 1", d.Version)
	}
	if d.TargetSGL.Length == 0 {
		return d, protocolError("target SGL of 0 entries")
	}
	return d, nil
}

// order is the byte order of the host that sent d, which is the order
// this side must use for the SGL and iomap entries it writes there.
func (d *connData) order() order {
	return d.Flags&connFlagNet != 0
}

// scaleIOMap encodes an iomap slot count in the conn data's one byte
// (rs_value_to_scale with 8 bits): up to 128 as is, larger counts in
// units of 256 with the top bit set.
func scaleIOMap(v int) uint8 {
	if v <= 128 {
		return uint8(v)
	}
	return uint8(0x80 | v>>8)
}

// unscaleIOMap decodes it (rs_scale_to_value).
func unscaleIOMap(b uint8) int {
	if b <= 128 {
		return int(b)
	}
	return int(b&0x7f) << 8
}

// roundIOMap is what C keeps of a requested iomap size (RDMA_IOMAPSIZE
// stores the round trip through the scale), capped at what one byte can
// carry.
func roundIOMap(v int) int {
	if v < 0 {
		return 0
	}
	if v > 0x7f<<8 {
		v = 0x7f << 8
	}
	return unscaleIOMap(scaleIOMap(v))
}

// The exported limits spell their values out for go doc; these tie them
// to the protocol's constants (a compile error if they drift apart).
var (
	_ [MinBufferSize - 2*sndLowat]struct{}
	_ [2*sndLowat - MinBufferSize]struct{}
	_ [MaxInlineLimit - qpMaxSize]struct{}
	_ [qpMaxSize - MaxInlineLimit]struct{}
)

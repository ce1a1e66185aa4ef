package qp

import (
	"fmt"
	"hash/maphash"

	"github.com/goverbs/goverbs/verbs"
)

// PeerInfo is what a peer needs to connect its QP to this one: the values
// two programs exchange out of band (over TCP, say) before QP.Connect.
// QP.PeerInfo fills it in. Its GID encodes as text, so the whole value
// travels as JSON: {"QPN":17,"PSN":1234,"LID":0,"GID":"::ffff:169.254.77.1","MTU":3}.
type PeerInfo struct {
	QPN uint32    // the QP's number
	PSN uint32    // the first packet sequence number it sends with (24 bits)
	LID uint16    // its port's LID (InfiniBand; 0 on RoCE)
	GID verbs.GID // its port's routable GID (RoCE: its IP address; verbs.Context.RoutableGID)
	MTU verbs.MTU // its port's active MTU; 0 if unknown
}

// PeerInfo returns what a peer needs to connect to q on its device's port (numbered from 1):
// QP number, starting send PSN, and the port's LID, routable GID and
// active MTU, read from the device on each call. Connect sends from that
// PSN, so give the peer this value, not a copy with another PSN.
//
// The PSN is a pseudo-random 24-bit number fixed for the QP (a hash of the
// QP's number and handle with a key drawn once per process), so that
// packets of an earlier QP with the same number are unlikely to be taken
// for this one's; no state is kept for it.
func (q *QP) PeerInfo(port int) (PeerInfo, error) {
	if q.isClosed() {
		return PeerInfo{}, fmt.Errorf("qp: peer info: %w", verbs.ErrClosed)
	}
	dev := q.PD().Context()
	pa, err := dev.QueryPort(port)
	if err != nil {
		return PeerInfo{}, fmt.Errorf("qp: peer info: %w", err)
	}
	ep := PeerInfo{QPN: q.QPN(), PSN: q.startPSN(), LID: pa.LID, MTU: pa.ActiveMTU}
	g, err := dev.RoutableGID(port)
	switch {
	case err == nil:
		ep.GID = g.GID
	case pa.LinkLayer == verbs.LinkLayerEthernet:
		// RoCE has no route without a GID; on InfiniBand the LID
		// suffices.
		return PeerInfo{}, fmt.Errorf("qp: peer info: %w", err)
	}
	return ep, nil
}

// psnSeed keys the hash that gives each QP its starting PSN.
var psnSeed = maphash.MakeSeed()

// startPSN is the send PSN PeerInfo advertises and Connect uses.
func (q *QP) startPSN() uint32 {
	return uint32(maphash.Comparable(psnSeed, [2]uint32{q.QPN(), q.Handle()})) & 0xffffff
}

package cm

import "strconv"

// RejectReason is why the connection manager of an InfiniBand or RoCE
// peer refused a connection (enum ib_cm_rej_reason, IBA table 112): the
// Status of an EventRejected there, and EventError.Reason. Its String is
// the kernel's text for it (ibcm_reject_msg), with a hint for the common
// ones.
type RejectReason int

// Reject reasons a program meets. The others print as the kernel names
// them.
const (
	// RejectTimeout: the peer gave up on the exchange (also what a
	// peer that closes its ID while its own request is unanswered sends).
	RejectTimeout RejectReason = 4
	// RejectInvalidServiceID: nothing listens on the address and port
	// connected to (the RDMA counterpart of ECONNREFUSED).
	RejectInvalidServiceID RejectReason = 8
	// RejectStaleConn: the peer still holds an earlier connection of the
	// same QP or ID in time-wait.
	RejectStaleConn RejectReason = 10
	// RejectConsumerDefined: the peer's application refused the request
	// (ID.Reject, rdma_reject) or closed it without accepting.
	RejectConsumerDefined RejectReason = 28
)

// rejectReasons is the kernel's ibcm_rej_reason_strs.
var rejectReasons = [...]string{
	1: "no QP", 2: "no EEC", 3: "no resources", 4: "timeout", 5: "unsupported",
	6: "invalid comm ID", 7: "invalid comm instance", 8: "invalid service ID",
	9: "invalid transport type", 10: "stale conn", 11: "RDC not exist", 12: "invalid GID",
	13: "invalid LID", 14: "invalid SL", 15: "invalid traffic class", 16: "invalid hop limit",
	17: "invalid packet rate", 18: "invalid alt GID", 19: "invalid alt LID", 20: "invalid alt SL",
	21: "invalid alt traffic class", 22: "invalid alt hop limit", 23: "invalid alt packet rate",
	24: "port CM redirect", 25: "port redirect", 26: "invalid MTU", 27: "insufficient resp resources",
	28: "consumer defined", 29: "invalid RNR retry", 30: "duplicate local comm ID",
	31: "invalid class version", 32: "invalid flow label", 33: "invalid alt flow label",
	35: "vendor option is not supported",
}

// rejectHints explain the reasons a program usually meets.
var rejectHints = map[RejectReason]string{
	RejectInvalidServiceID: "nothing listens on that address and port",
	RejectConsumerDefined:  "the peer's application refused the request",
	RejectStaleConn:        "the peer still holds an earlier connection in time-wait",
}

// String returns the kernel's text for the reason and its number, with a
// hint for the common ones: "invalid service ID (reason 8: nothing
// listens on that address and port)".
func (r RejectReason) String() string {
	text := "unrecognized reason"
	if r >= 0 && int(r) < len(rejectReasons) && rejectReasons[r] != "" {
		text = rejectReasons[r]
	}
	n := "reason " + strconv.Itoa(int(r))
	if h, ok := rejectHints[r]; ok {
		return text + " (" + n + ": " + h + ")"
	}
	return text + " (" + n + ")"
}

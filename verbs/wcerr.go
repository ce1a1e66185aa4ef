package verbs

import "strconv"

// Error makes a WCStatus an error value, as syscall.Errno is one, so that
// errors.Is(err, WCRetryExcErr) asks whether err is, or wraps, a
// completion that failed with that status. WCSuccess is not an error a
// goverbs call returns: WorkCompletion.Err returns nil for it.
func (s WCStatus) Error() string { return s.String() }

// WCError is the error of a work completion whose status is not
// WCSuccess, as WorkCompletion.Err and cq.CQ.Next return it: the status,
// the provider's vendor error, and which work request it was (the only
// fields of a failed completion that are valid). It unwraps to its
// Status, so errors.Is(err, verbs.WCWRFlushErr) holds for a flushed work
// request.
type WCError struct {
	Status    WCStatus
	VendorErr uint32 // provider-specific detail; 0 when the provider gives none
	WRID      uint64 // the wr_id of the failed work request
	QPNum     uint32 // the local QP it was posted on
}

// Error says which work request failed and how: "verbs: work request
// 0x2 on QP 17: remote access error (vendor error 0x0)".
func (e *WCError) Error() string {
	return "verbs: work request 0x" + strconv.FormatUint(e.WRID, 16) + " on QP " + strconv.FormatUint(uint64(e.QPNum), 10) +
		": " + e.Status.String() + " (vendor error 0x" + strconv.FormatUint(uint64(e.VendorErr), 16) + ")"
}

// Unwrap returns the completion's status, for errors.Is.
func (e *WCError) Unwrap() error { return e.Status }

// Err returns nil for a successful completion and a *WCError otherwise: one
// check per completion instead of two. It allocates only for a failed
// completion.
func (wc *WorkCompletion) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &WCError{Status: wc.Status, VendorErr: wc.VendorErr, WRID: wc.WRID, QPNum: wc.QPNum}
}

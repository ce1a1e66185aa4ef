package testutil

import (
	"fmt"
	"testing"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Carry returns wr carrying msg, for a test whose point is not inline
// data: inline when q was granted room for msg (q.Caps().MaxInlineData,
// the device's answer to CREATE_QP), else from a copy of msg in memory of
// its own, registered in q's PD and closed when the test ends (a device
// that grants no inline data: the pvrdma device model grants 0). The
// work request reaches the peer with the same bytes either way. Tests of
// inline data itself use SkipUnlessInline instead.
func Carry(t testing.TB, q *qp.QP, wr verbs.SendWR, msg []byte) verbs.SendWR {
	t.Helper()
	if len(msg) <= q.Caps().MaxInlineData {
		wr.InlineData = msg
		return wr
	}
	m, err := mr.New(q.PD(), max(len(msg), 1), mr.LocalWrite)
	if err != nil {
		t.Fatalf("memory for a %d-byte message the QP cannot carry inline: %v", len(msg), err)
	}
	t.Cleanup(func() { m.Close() })
	copy(m.Bytes(), msg)
	wr.InlineData = nil
	wr.SGList = []verbs.SGE{SGE(m, 0, len(msg))}
	return wr
}

// SkipUnlessInline skips the test unless q was granted at least n bytes
// of inline data (q.Caps().MaxInlineData, the device's answer to
// CREATE_QP; qp.Caps asked at creation are minimums the device may not
// meet).
func SkipUnlessInline(t testing.TB, q *qp.QP, n int) {
	t.Helper()
	got := q.Caps().MaxInlineData
	SkipUnlessCap(t, got >= n, fmt.Sprintf("%d bytes of inline data (the device granted the QP max_inline_data %d)", n, got))
}

package qp_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/verbs"
)

// TestDataInOrder: rxe and siw, like every rdma-core v44 provider but mlx5,
// make no in-order placement promise (ibv_query_qp_data_in_order returns 0).
func TestDataInOrder(t *testing.T) {
	p := testutil.NewPair(t, testutil.PairOptions{})
	for _, op := range []verbs.WROpcode{verbs.WRSend, verbs.WRRDMAWrite, verbs.WRRDMARead} {
		if p.A.QP.DataInOrder(op) {
			t.Errorf("%s on %s: in order, rdma-core says no", op, p.Ctx.Device().Driver)
		}
	}
}

package qp

import "github.com/goverbs/goverbs/verbs"

// DataInOrder reports whether the device guarantees that the data of one
// work request of operation op (verbs.WRSend, verbs.WRRDMAWrite: placed into
// this QP's memory by the peer; verbs.WRRDMARead: read by this QP) is
// written in order, so that a reader may poll the last byte instead of a
// completion: ibv_query_qp_data_in_order with flags 0.
//
// It is a provider query, not a kernel command (Linux 6.1 and 6.12 have no
// uverbs method for it): in rdma-core v44 only mlx5 answers from its
// device capabilities, every other provider returns 0. goverbs' providers
// (rxe, siw) give the same answer: false, also for a closed QP. Like
// libibverbs, the answer would hold only for memory the CPU reads and
// never for a RelaxedOrdering MR.
func (q *QP) DataInOrder(op verbs.WROpcode) bool {
	return false
}

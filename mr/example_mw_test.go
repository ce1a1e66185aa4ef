package mr_test

import (
	"log"

	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/verbs"
)

// Grant a connected peer remote write access to one page of a larger
// region for one exchange, then revoke it, with work requests instead of
// registrations.
func ExampleMW() {
	var pd *verbs.PD // the PD of q
	var q *qp.QP     // an RC QP connected to the peer, in RTS

	region, err := mr.New(pd, 1<<20, mr.LocalWrite|mr.RemoteWrite|mr.MWBind)
	if err != nil {
		log.Fatal(err)
	}
	defer region.Close()
	w, err := mr.AllocMW(pd, mr.MWType2)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	bind, err := w.BindWR(1, region, region.IOVA()+4096, 4096, mr.RemoteWrite, verbs.SendSignaled)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.PostSend([]verbs.SendWR{bind}); err != nil {
		log.Fatal(err)
	}
	// ... once the bind completed, send the peer w.RKey() and the
	// address; it writes; then revoke the key:
	if err := q.PostSend([]verbs.SendWR{w.InvalidateWR(2, verbs.SendSignaled)}); err != nil {
		log.Fatal(err)
	}
}

package mr_test

import (
	"fmt"
	"log"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { devexample.Main(m, "Example", "ExampleMR_Remote") }

// Register memory and name parts of it in work requests: SGE for the
// local side of a post, Remote for what a peer needs to reach it. New
// maps the memory outside the Go heap; Close unregisters and unmaps it.
func Example() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	m, err := mr.New(pd, 4096, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	copy(m.Bytes()[128:], "payload")
	sge := m.SGE(128, 7) // for verbs.SendWR.SGList or verbs.RecvWR.SGList
	fmt.Println(sge.Addr-m.IOVA(), sge.Length, sge.LKey == m.LKey())
	// Output: 128 7 true
}

// The peer writes into the second half of the region with the address and
// key Remote gives; send them to it by any means.
func ExampleMR_Remote() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	m, err := mr.New(pd, 4096, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	// The peer posts verbs.SendWR{Opcode: verbs.WRRDMAWrite, RemoteAddr:
	// r.Addr, RKey: r.RKey, ...} with what it got.
	r := m.Remote(2048)
	fmt.Println(r.Addr-m.IOVA(), r.Len, r.RKey == m.RKey())
	// Output: 2048 2048 true
}

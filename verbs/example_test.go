package verbs_test

import (
	"errors"
	"fmt"
	"log"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/verbs"
)

// Open a device, look at it, allocate a protection domain. Close releases
// everything the context still owns.
func Example() {
	ctx, err := verbs.Open("rxe0")
	if errors.Is(err, verbs.ErrNoDevice) {
		fmt.Println("no rxe0 here")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()

	attr, err := ctx.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	port, err := ctx.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ctx.Device().Name, attr.NodeGUID, port.State, port.ActiveMTU)

	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
}

func ExampleDevices() {
	devs, err := verbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		fmt.Printf("%s: driver %s, %s, GUID %s\n", d.Name, d.Driver, d.Path, d.NodeGUID)
	}
}

func ExampleGID_String() {
	gid := verbs.GID{10: 0xff, 11: 0xff, 12: 169, 13: 254, 14: 77, 15: 1}
	fmt.Println(gid)
	fmt.Println(gid.HexString())
	// Output:
	// ::ffff:169.254.77.1
	// 0000:0000:0000:0000:0000:ffff:a9fe:4d01
}

func ExampleGUIDFromUint64() {
	// RDMA netlink reports GUIDs as host-order integers.
	fmt.Println(verbs.GUIDFromUint64(0x18102dfffe323f2d))
	// Output: 1810:2dff:fe32:3f2d
}

// Completion opcodes and statuses print as libibverbs names them.
func ExampleWCOpcode_String() {
	wc := verbs.WorkCompletion{Opcode: verbs.WCRDMAWrite, Status: verbs.WCRemAccessErr}
	fmt.Println(wc.Opcode.String() + ": " + wc.Status.String())
	// Output: RDMA_WRITE: remote access error
}

// CheckWR tells before posting whether the device can run an operation
// that needs a capability (FLUSH, ATOMIC WRITE).
func ExampleContext_CheckWR() {
	ctx, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	if err := ctx.CheckWR(verbs.WRFlush, verbs.FlushPersistent); errors.Is(err, verbs.ErrNotCapable) {
		fmt.Println("no persistent FLUSH here: write, then read back")
	}
}

// The async-event and completion-channel descriptors are non-blocking and
// readable when an event is queued: an application with its own event loop
// watches them with epoll, and reads them with Context.Event and
// cq.WaitChannel.
func ExampleContext_AsyncFD() {
	ctx, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	ch, err := ctx.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		log.Fatal(err)
	}
	defer unix.Close(ep)
	for _, fd := range []int{ctx.AsyncFD(), ch.FD()} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			log.Fatal(err)
		}
	}
}

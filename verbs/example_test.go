package verbs_test

import (
	"errors"
	"fmt"
	"log"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil/devexample"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) {
	devexample.Main(m, "Example", "ExampleContext_RoutableGID")
}

// Open a device, look at it, allocate a protection domain. Close releases
// everything the context still owns. (The context is called dev here:
// ctx is the name of a context.Context, which RDMA programs need too.)
func Example() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	attr, err := dev.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	port, err := dev.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	fmt.Println(dev.Device().Name, dev.Device().Driver, port.State, attr.MaxQP > 0)
	// Output: rxe0 rxe PORT_ACTIVE true
}

// A missing device is ErrNoDevice.
func ExampleOpen() {
	_, err := verbs.Open("mlx5_7")
	fmt.Println(errors.Is(err, verbs.ErrNoDevice))
	// Output: true
}

// RoutableGID picks the GID a peer should address the port by: on RoCE
// the RoCE v2 GID of the network device's IPv4 address, when it has one.
// GID.Addr gives it as a netip.Addr.
func ExampleContext_RoutableGID() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	e, err := dev.RoutableGID(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Type, e.GID.Addr().Is4())
	// Output: RoCE v2 true
}

// GIDs and IP addresses convert both ways; an IPv4 address is
// IPv4-mapped in a GID.
func ExampleGIDFromAddr() {
	gid := verbs.GIDFromAddr(netip.MustParseAddr("169.254.77.1"))
	fmt.Println(gid, gid.Addr())
	// Output: ::ffff:169.254.77.1 169.254.77.1
}

// One check per completion: Err is nil on success and a *WCError
// otherwise, which errors.Is matches against the status.
func ExampleWorkCompletion_Err() {
	wc := verbs.WorkCompletion{WRID: 7, QPNum: 17, Status: verbs.WCRNRRetryExcErr}
	err := wc.Err()
	fmt.Println(err)
	fmt.Println(errors.Is(err, verbs.WCRNRRetryExcErr))
	// Output:
	// verbs: work request 0x7 on QP 17: RNR retry counter exceeded (vendor error 0x0)
	// true
}

// SendWR.Imm is the host-order value; the receiver's WorkCompletion.Imm
// returns it in host order again. Only WorkCompletion.ImmData holds the
// wire's (network) byte order.
func ExampleWorkCompletion_Imm() {
	wr := verbs.SendWR{Opcode: verbs.WRSendWithImm, Imm: 0x01020304}
	wc := verbs.WorkCompletion{Flags: verbs.WCWithImm, ImmData: verbs.HostToImm(wr.Imm)} // as the receiver gets it
	fmt.Printf("%#x\n", wc.Imm())
	// Output: 0x1020304
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
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	if err := dev.CheckWR(verbs.WRFlush, verbs.FlushPersistent); errors.Is(err, verbs.ErrNotCapable) {
		fmt.Println("no persistent FLUSH here: write, then read back")
	}
}

// The async-event and completion-channel descriptors are non-blocking and
// readable when an event is queued: an application with its own event loop
// watches them with epoll, and reads them with Context.Event and
// cq.WaitChannel.
func ExampleContext_AsyncFD() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		log.Fatal(err)
	}
	defer unix.Close(ep)
	for _, fd := range []int{dev.AsyncFD(), ch.FD()} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			log.Fatal(err)
		}
	}
}

// An unused slot of a GID table has a zero interface id (its low 8
// bytes), the test libibverbs uses; RoutableGID skips such entries.
func ExampleGID_IsZero() {
	linkLocal := verbs.GIDFromAddr(netip.MustParseAddr("fe80::"))
	fmt.Println(linkLocal.IsZero(), verbs.GIDFromAddr(netip.MustParseAddr("169.254.77.1")).IsZero())
	// Output: true false
}

// Soft-RoCE on a machine without RDMA hardware: an rxe device on an
// Ethernet interface, as "rdma link add rxe0 type rxe netdev eth0" makes
// it. It needs CAP_NET_ADMIN (root) and the rdma_rxe module.
func ExampleAddLink() {
	if err := verbs.AddLink("rxe0", verbs.DriverRXE, "eth0"); err != nil {
		log.Fatal(err)
	}
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
}

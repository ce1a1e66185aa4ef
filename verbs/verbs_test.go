package verbs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
	"github.com/goverbs/goverbs/verbs"
)

func TestDevicesNetlinkMatchesSysfs(t *testing.T) {
	dev := testutil.Device(t)
	if !dev.Driver.Supported() || !dev.IndexKnown || dev.CharDev == "" || dev.Ports != 1 {
		t.Fatalf("netlink device: %+v", dev)
	}
	sys, err := verbs.DevicesFromSysfs()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sys {
		if s.Name != dev.Name {
			continue
		}
		// sysfs cannot know the index or the protocol.
		want := dev
		want.Index, want.IndexKnown, want.Protocol = 0, false, ""
		if diff := cmp.Diff(want, s); diff != "" {
			t.Fatalf("sysfs view differs from netlink (-netlink +sysfs):\n%s", diff)
		}
		return
	}
	t.Fatalf("%s not found through sysfs: %+v", dev.Name, sys)
}

func TestQueryDeviceAndPort(t *testing.T) {
	ctx := testutil.Open(t)
	a, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	// Fact sheet §4.8: rxe's limits.
	if ctx.Device().Driver == verbs.DriverRXE && (a.MaxQPWR != 1048576 || a.MaxSGE != 32 || a.MaxCQE != 32767 || a.AtomicCap != verbs.AtomicHCA ||
		a.PhysPortCnt != 1 || a.MaxMRSize != ^uint64(0) || a.FWVersion != "0.0.0") {
		t.Errorf("unexpected rxe attributes: %+v", a)
	}
	if a.NodeGUID != ctx.Device().NodeGUID {
		t.Errorf("node GUID %s from QUERY_DEVICE, %s from netlink", a.NodeGUID, ctx.Device().NodeGUID)
	}
	if ctx.NumCompVectors() < 1 {
		t.Errorf("num_comp_vectors %d", ctx.NumCompVectors())
	}
	p, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	// rxe's largest MTU is 4096 whatever the netdev; siw derives it from
	// the netdev: its max_mtu on 6.12, its current MTU on 6.1
	// (docs/kernels.md §9).
	if p.State != verbs.PortActive || p.LinkLayer != verbs.LinkLayerEthernet || p.GIDTblLen == 0 || p.MaxMTU < p.ActiveMTU ||
		(ctx.Device().Driver == verbs.DriverRXE && p.MaxMTU != verbs.MTU4096) {
		t.Errorf("port 1: %+v", p)
	}
	if _, err := ctx.QueryPort(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(2) on a one-port device: %v, want EINVAL", err)
	}
	if _, err := ctx.QueryPort(0); err == nil {
		t.Error("QueryPort(0) succeeded")
	}
}

func TestGIDTable(t *testing.T) {
	ctx := testutil.Open(t)
	testutil.SkipUnlessCap(t, ctx.Device().NodeType.Transport() != verbs.TransportIWARP,
		"IP-address GIDs (RoCE; transport iWARP derives its one GID from the MAC)")
	addr := netip.MustParseAddr(testutil.Addr(t))
	port, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	table, err := ctx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	used := map[int]bool{}
	for _, e := range table {
		used[e.Index] = true
		// A RoCE port's GIDs are RoCE v1 or v2 (rxe: v2 only; qemu's
		// pvrdma: v1 only), each of the type sysfs gives it.
		if e.Type != verbs.GIDTypeRoCEv1 && e.Type != verbs.GIDTypeRoCEv2 {
			t.Errorf("GID %d on a RoCE port has type %s", e.Index, e.Type)
		}
		if b, err := os.ReadFile("/sys/class/infiniband/" + ctx.Device().Name + "/ports/" + strconv.Itoa(e.Port) + "/gid_attrs/types/" + strconv.Itoa(e.Index)); err == nil {
			want := map[string]verbs.GIDType{"IB/RoCE v1": verbs.GIDTypeRoCEv1, "RoCE v2": verbs.GIDTypeRoCEv2}[strings.TrimSpace(string(b))]
			if e.Type != want {
				t.Errorf("GID %d has type %s, sysfs says %q", e.Index, e.Type, strings.TrimSpace(string(b)))
			}
		}
		one, err := ctx.QueryGID(e.Port, e.Index)
		if err != nil {
			t.Fatalf("QueryGID(%d, %d): %v", e.Port, e.Index, err)
		}
		if one != e {
			t.Errorf("QueryGID(%d, %d) = %+v, table has %+v", e.Port, e.Index, one, e)
		}
		if netip.AddrFrom16(e.GID).Unmap() == addr {
			found = true
			if got := e.GID.String(); got != "::ffff:"+addr.String() {
				t.Errorf("GID string %q", got)
			}
		}
	}
	if !found {
		t.Errorf("no GID for %s in %+v", addr, table)
	}
	// An unused index within the port's table (gid_tbl_len: rxe 1024,
	// pvrdma 255) has no entry; one beyond it is not an index at all.
	unused := -1
	for i := port.GIDTblLen - 1; i >= 0; i-- {
		if !used[i] {
			unused = i
			break
		}
	}
	if unused >= 0 {
		if _, err := ctx.QueryGID(1, unused); !errors.Is(err, unix.ENODATA) {
			t.Errorf("QueryGID of unused index %d (table of %d): %v, want ENODATA", unused, port.GIDTblLen, err)
		}
	}
	if _, err := ctx.QueryGID(1, port.GIDTblLen); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryGID of index %d, beyond the table: %v, want EINVAL", port.GIDTblLen, err)
	}
}

// The GID table as sysfs shows it must agree with the one from the kernel.
func TestGIDTableMatchesSysfs(t *testing.T) {
	ctx := testutil.Open(t)
	table, err := ctx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range table {
		raw, err := os.ReadFile("/sys/class/infiniband/" + ctx.Device().Name + "/ports/1/gids/" + strconv.Itoa(e.Index))
		if err != nil {
			t.Fatal(err)
		}
		b := strings.TrimSpace(string(raw))
		if got := e.GID.HexString(); got != b {
			t.Errorf("GID %d: %s from the kernel, %s in sysfs", e.Index, got, b)
		}
	}
}

// TestOpenCloseLeavesNothing opens and closes a context 1000 times (100
// with -short: test-pvrdma's nested bed, where a cycle costs about 100 ms)
// and looks for kernel objects and descriptors left behind.
func TestOpenCloseLeavesNothing(t *testing.T) {
	dev := testutil.Device(t)
	warm, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	baseRes := testutil.Resources(t, dev)
	baseFDs := testutil.OpenFDs(t)
	n := testutil.LeakCycles(1000)
	for i := 0; i < n; i++ {
		ctx, err := verbs.OpenDevice(dev)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%2 == 0 {
			// Half the time leave the PD to Context.Close.
			if err := pd.Close(); err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
		}
		if err := ctx.Close(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, baseRes) {
		t.Errorf("after %d open/close cycles kernel objects %v, before %v", n, got, baseRes)
	}
	if got := testutil.OpenFDs(t); got != baseFDs {
		t.Errorf("after %d cycles %d fds open, before %d: %s", n, got, baseFDs, testutil.FDTargets())
	}
}

// Our netlink resource counts must be what "rdma resource show" prints.
func TestResourcesMatchRdmaTool(t *testing.T) {
	ctx := testutil.Open(t)
	if _, err := ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	rdma := testutil.LookPath(t, "rdma")
	out, err := exec.Command(rdma, "resource", "show", ctx.Device().Name).CombinedOutput()
	if err != nil {
		t.Fatalf("rdma resource show: %v\n%s", err, out)
	}
	res := testutil.Resources(t, ctx.Device())
	for _, m := range regexp.MustCompile(`([a-z_]+) (\d+)`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseUint(m[2], 10, 64)
		if res[m[1]] != n {
			t.Errorf("%s: rdma tool says %d, netlink gave %d (%s)", m[1], n, res[m[1]], strings.TrimSpace(string(out)))
		}
	}
	if res["pd"] < 1 || res["ctx"] < 1 {
		t.Errorf("resources %v do not show our context and PD", res)
	}
}

func TestContextCloseReleasesObjects(t *testing.T) {
	dev := testutil.Device(t)
	base := testutil.Resources(t, dev)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	var pds []*verbs.PD
	for i := 0; i < 3; i++ {
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		pds = append(pds, pd)
	}
	if got := testutil.Resources(t, dev)["pd"]; got != base["pd"]+3 {
		t.Fatalf("pd count %d, want %d", got, base["pd"]+3)
	}
	if kobj.ContextOf(ctx).Count(kobj.KindPD) != 3 {
		t.Fatalf("context tracks %d PDs", kobj.ContextOf(ctx).Count(kobj.KindPD))
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.Resources(t, dev); !cmp.Equal(got, base) {
		t.Fatalf("after Close: %v, before %v", got, base)
	}
	for _, pd := range pds {
		if err := pd.Close(); err != nil {
			t.Errorf("PD.Close after Context.Close: %v", err)
		}
		if err := kobj.CheckPD(pd); !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("CheckPD after close: %v", err)
		}
	}
}

func TestClosedContext(t *testing.T) {
	dev := testutil.Device(t)
	ctx, err := verbs.OpenDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ctx.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("AllocPD on closed context: %v", err)
	}
	if _, err := ctx.QueryDevice(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("QueryDevice on closed context: %v", err)
	}
	if _, err := ctx.QueryPort(1); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("QueryPort on closed context: %v", err)
	}
	if _, err := ctx.QueryGIDTable(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("QueryGIDTable on closed context: %v", err)
	}
	var r uverbs.Ioctl
	r.Init("DEVICE.QUERY_PORT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_PORT, uint32(dev.Driver))
	if err := kobj.ContextOf(ctx).Do(&r); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("raw ioctl on closed context: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	dev := testutil.Device(t)

	if _, err := verbs.Open("no-such-device0"); !errors.Is(err, verbs.ErrNoDevice) {
		t.Errorf("Open of a missing device: %v", err)
	}

	notUverbs := dev
	notUverbs.Path, notUverbs.Dev = "/dev/null", 0
	if _, err := verbs.OpenDevice(notUverbs); !errors.Is(err, verbs.ErrNotUverbs) {
		t.Errorf("OpenDevice(/dev/null): %v", err)
	}
	notUverbs.Path = "/etc/hostname"
	if _, err := verbs.OpenDevice(notUverbs); !errors.Is(err, verbs.ErrNotUverbs) {
		t.Errorf("OpenDevice(regular file): %v", err)
	}
	wrongDev := dev
	wrongDev.Dev++
	if _, err := verbs.OpenDevice(wrongDev); !errors.Is(err, verbs.ErrNotUverbs) {
		t.Errorf("OpenDevice with a mismatched dev_t: %v", err)
	}
	noChar := dev
	noChar.Path = ""
	if _, err := verbs.OpenDevice(noChar); !errors.Is(err, verbs.ErrNotUverbs) {
		t.Errorf("OpenDevice without a char device: %v", err)
	}

	for _, drv := range []verbs.Driver{verbs.DriverMLX4, verbs.Driver(99)} {
		wrong := dev
		wrong.Driver = drv
		_, err := verbs.OpenDevice(wrong)
		if !errors.Is(err, verbs.ErrProviderNotSupported) {
			t.Errorf("OpenDevice with driver %s: %v", drv, err)
			continue
		}
		if !strings.Contains(err.Error(), drv.String()) {
			t.Errorf("error %q does not name driver %s", err, drv)
		}
	}

	// The kernel itself checks the driver id of every ioctl.
	ctx := testutil.Open(t)
	var r uverbs.Ioctl
	var resp uverbs.QueryPortRespEx
	r.Init("DEVICE.QUERY_PORT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_PORT, uverbs.RDMA_DRIVER_MLX5)
	r.Const(uverbs.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
	r.Out(uverbs.UVERBS_ATTR_QUERY_PORT_RESP, unsafe.Pointer(&resp), 48)
	if err := kobj.ContextOf(ctx).Do(&r); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ioctl with a wrong driver id: %v, want EINVAL", err)
	}
	// An unknown method is EPROTONOSUPPORT, a short output EINVAL.
	r.Init("DEVICE.?", uverbs.UVERBS_OBJECT_DEVICE, 99, kobj.ContextOf(ctx).Driver)
	if err := kobj.ContextOf(ctx).Do(&r); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("unknown method: %v, want EPROTONOSUPPORT", err)
	}
	r.Init("DEVICE.QUERY_PORT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_PORT, kobj.ContextOf(ctx).Driver)
	r.Const(uverbs.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
	r.Out(uverbs.UVERBS_ATTR_QUERY_PORT_RESP, unsafe.Pointer(&resp), 32)
	if err := kobj.ContextOf(ctx).Do(&r); !errors.Is(err, unix.EINVAL) {
		t.Errorf("32-byte QUERY_PORT response: %v, want EINVAL", err)
	}
}

// TestObjectAccessors checks what the public objects tell about
// themselves: their parents, kernel handles and descriptor numbers.
func TestObjectAccessors(t *testing.T) {
	dev := testutil.Device(t)
	ctx := testutil.Open(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	if pd.Context() != ctx {
		t.Error("PD.Context is not the context it was allocated on")
	}
	pd2, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd2.Close()
	if pd.Handle() == pd2.Handle() {
		t.Errorf("two PDs share the kernel handle %d", pd.Handle())
	}
	ch, err := ctx.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	if ch.Context() != ctx {
		t.Error("CompChannel.Context is not the context it was created on")
	}
	if ch.FD() < 0 || ctx.AsyncFD() < 0 || ch.FD() == ctx.AsyncFD() {
		t.Errorf("descriptor numbers: channel %d, async events %d", ch.FD(), ctx.AsyncFD())
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if ch.FD() != -1 {
		t.Errorf("CompChannel.FD after Close: %d, want -1", ch.FD())
	}
	// An opcode that needs no capability passes on every device; FLUSH
	// passes exactly when the device reports the placement type.
	if err := ctx.CheckWR(verbs.WRRDMAWrite, 0); err != nil {
		t.Errorf("CheckWR(RDMA WRITE): %v", err)
	}
	caps, err := ctx.CapFlags()
	if err != nil {
		t.Fatal(err)
	}
	err = ctx.CheckWR(verbs.WRFlush, verbs.FlushGlobal)
	if have := caps&verbs.DeviceCapFlushGlobal != 0; have != (err == nil) || (err != nil && !errors.Is(err, verbs.ErrNotCapable)) {
		t.Errorf("CheckWR(FLUSH global) with the capability %v: %v", have, err)
	}

	attr, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	testutil.SkipUnlessCap(t, attr.MaxAH > 0 && dev.NodeType.Transport() != verbs.TransportIWARP,
		"address handles (max_ah > 0 on an IB/RoCE device)")
	ah, err := pd.CreateAH(func() *verbs.AHAttr { a := testutil.Path(t, ctx); return &a }())
	testutil.SkipUnlessCap(t, !errors.Is(err, verbs.ErrNotCapable), "address handles (CREATE_AH: "+fmt.Sprint(err)+")")
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	if ah.PD() != pd {
		t.Error("AH.PD is not the PD it was created in")
	}
}

// CreateAH refuses a path the device cannot use with EINVAL, whether the
// kernel builds the handle or the provider does (pvrdma): no GRH on a
// RoCE port, a port the device does not have.
func TestCreateAHBadInput(t *testing.T) {
	ctx := testutil.Open(t)
	dev := ctx.Device()
	attr, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	testutil.SkipUnlessCap(t, attr.MaxAH > 0 && dev.NodeType.Transport() != verbs.TransportIWARP,
		"address handles (max_ah > 0 on an IB/RoCE device)")
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	for name, mod := range map[string]func(*verbs.AHAttr){
		"no GRH":   func(a *verbs.AHAttr) { a.IsGlobal = false },
		"port 0":   func(a *verbs.AHAttr) { a.Port = 0 },
		"port 200": func(a *verbs.AHAttr) { a.Port = 200 },
	} {
		a := testutil.Path(t, ctx)
		mod(&a)
		ah, err := pd.CreateAH(&a)
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
		if ah != nil {
			ah.Close()
		}
	}
}

// Package difftest compares goverbs' mlx5 provider with rdma-core's
// libmlx5 44 byte for byte: each scenario (testdata/scenarios/*.scn, the
// language in README.md) runs through libibverbs + libmlx5 under a fake
// kernel (c/fake.c, LD_PRELOAD) and through goverbs under the same fake
// kernel written in Go (fake_test.go, installed with internal/uverbshook),
// and the two traces must be equal. make test-mlx5 builds the C side and
// runs TestDiff.
package difftest

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/uverbshook"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// The largest MR a scenario makes (c/driver.c's MR_STRIDE).
const mrStride = 0x1000000

// devicePath returns the absolute path of testdata/device.txt, the device
// description both fake kernels read.
func devicePath(t testing.TB) string {
	t.Helper()
	dev, err := filepath.Abs("testdata/device.txt")
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// scenarios lists the scenario files: testdata/scenarios and
// MLX5_SCENARIOS's directory.
func scenarios(t *testing.T) []string {
	files, err := filepath.Glob("testdata/scenarios/*.scn")
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("MLX5_SCENARIOS"); dir != "" {
		more, err := filepath.Glob(filepath.Join(dir, "*.scn"))
		if err != nil {
			t.Fatal(err)
		}
		if len(more) == 0 {
			t.Fatalf("MLX5_SCENARIOS=%s holds no *.scn file", dir)
		}
		files = append(files, more...)
	}
	sort.Strings(files)
	return files
}

// TestDiff runs every scenario through both sides and compares the
// traces. It needs the C side built (MLX5_C_DIR, make mlx5-c) and skips
// without it. MLX5_C_EXEC, if set, is a
// command (words split at spaces) the C driver runs under: make
// test-mlx5-arm64 sets it to qemu-aarch64 with its arm64 root, since
// under qemu-user this test cannot exec an arm64 program by itself.
func TestDiff(t *testing.T) {
	cdir := os.Getenv("MLX5_C_DIR")
	if cdir == "" {
		testutil.SkipOptIn(t, "make test-mlx5 runs it (MLX5_C_DIR: the C side that make mlx5-c builds)")
	}
	wrap := strings.Fields(os.Getenv("MLX5_C_EXEC"))
	dev := devicePath(t)
	passed, failed := 0, 0
	for _, f := range scenarios(t) {
		ran := false // t.Run reports a subtest -run leaves out as passed
		ok := t.Run(strings.TrimSuffix(filepath.Base(f), ".scn"), func(t *testing.T) {
			ran = true
			gout, addrs, gerr := runGo(dev, f)
			args := append(append(wrap[:len(wrap):len(wrap)], filepath.Join(cdir, "driver")), f)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "FAKE_DEVICE="+dev, "LD_PRELOAD="+filepath.Join(cdir, "fake.so"),
				"MLX5_MR_ADDRS="+strings.Join(addrs, ","))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			cout, err := cmd.Output()
			if err != nil {
				t.Fatalf("C driver: %v\n%s%s", err, cout, stderr.String())
			}
			if gerr != nil {
				t.Fatalf("Go driver: %v\ntrace so far:\n%s", gerr, gout)
			}
			compare(t, string(cout), gout)
		})
		switch {
		case !ran:
		case ok:
			passed++
		default:
			failed++
		}
	}
	fmt.Printf("mlx5 scenarios: %d passed, %d failed\n", passed, failed)
}

// TestGoScenarios runs every scenario through goverbs alone, as make
// unit does without the C side: each must run to its end, its trace must
// say so, and the race detector watches the provider's data path.
func TestGoScenarios(t *testing.T) {
	dev := devicePath(t)
	for _, f := range scenarios(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".scn"), func(t *testing.T) {
			out, _, err := runGo(dev, f)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if strings.Contains(out, "\nerror line ") || !strings.Contains(out, "\ndump ") {
				t.Fatalf("the scenario did not run through:\n%s", out)
			}
		})
	}
}

// compare reports the first lines where the traces differ, but for the
// one difference goverbs makes on purpose (withoutDynUAR).
func compare(t *testing.T, c, g string) {
	t.Helper()
	cl, gl := strings.Split(c, "\n"), strings.Split(g, "\n")
	for i, l := range cl {
		cl[i] = withoutDynUAR(l)
	}
	n := 0
	for i := 0; i < max(len(cl), len(gl)); i++ {
		var a, b string
		if i < len(cl) {
			a = cl[i]
		}
		if i < len(gl) {
			b = gl[i]
		}
		if a == b {
			continue
		}
		t.Errorf("line %d:\n  C:  %s\n  Go: %s", i+1, a, b)
		if n++; n == 5 {
			break
		}
	}
	if n > 0 && testing.Verbose() {
		t.Logf("C trace:\n%s\nGo trace:\n%s", c, g)
	}
}

// withoutDynUAR clears MLX5_LIB_CAP_DYN_UAR in libmlx5's GET_CONTEXT
// request (lib_caps, byte 24 of struct mlx5_ib_alloc_ucontext_req_v2),
// the one byte goverbs sends differently on purpose: libmlx5 offers
// dynamic UARs, which a real kernel then allocates through the UAR object's
// ioctl methods instead of the static BlueFlame registers, answering
// tot_bfregs 0; goverbs uses the static registers, as libmlx5 did before it
// offered dynamic ones, so it does not offer them (mlx5.go). The fakes
// answer static registers either way.
func withoutDynUAR(line string) string {
	const pos = len("in=") + 2*24
	if !strings.HasPrefix(line, "cmd GET_CONTEXT ") {
		return line
	}
	i := strings.Index(line, " in=")
	if i < 0 || len(line) < i+1+pos+2 {
		return line
	}
	at := i + 1 + pos
	b, err := strconv.ParseUint(line[at:at+2], 16, 8)
	if err != nil {
		return line
	}
	return line[:at] + fmt.Sprintf("%02x", b&^2) + line[at+2:]
}

// goDriver runs a scenario through goverbs' public API, as c/driver.c
// does through libibverbs.
type goDriver struct {
	k    *fakeKernel
	out  *strings.Builder
	ctx  *verbs.Context
	objs map[string]any
	line int
	ncq  int
	cqi  map[*cq.CQ]int
	bufs [][]byte
}

// runGo runs a scenario through goverbs and returns its trace and the
// addresses of the MR buffers it mapped, for the C driver to map its own
// at.
func runGo(dev, scenario string) (string, []string, error) {
	d, err := loadDevice(dev)
	if err != nil {
		return "", nil, err
	}
	var out strings.Builder
	k := newFakeKernel(d, &out)
	restore := uverbshook.Install(k)
	defer restore()
	defer k.close()
	g := &goDriver{k: k, out: &out, objs: map[string]any{}, cqi: map[*cq.CQ]int{}}
	defer g.cleanup()
	f, err := os.Open(scenario)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		g.line++
		line, _, _ := strings.Cut(sc.Text(), "#")
		tok := strings.Fields(line)
		if len(tok) == 0 {
			continue
		}
		fmt.Fprintf(&out, "> %s\n", strings.Join(tok, " "))
		if err := g.run(tok); err != nil {
			fmt.Fprintf(&out, "error line %d: %v\n", g.line, err)
			return out.String(), g.addrs(), nil // the C driver stops the same way
		}
		k.dump(strconv.Itoa(g.line))
	}
	return out.String(), g.addrs(), sc.Err()
}

func (g *goDriver) addrs() []string {
	var a []string
	for _, b := range g.bufs {
		a = append(a, fmt.Sprintf("%#x", uintptr(unsafe.Pointer(&b[0]))))
	}
	return a
}

func (g *goDriver) cleanup() {
	if g.ctx != nil {
		g.ctx.Close()
	}
	for _, b := range g.bufs {
		unix.Munmap(b)
	}
}

func (g *goDriver) printf(format string, args ...any) { fmt.Fprintf(g.out, format, args...) }

func get[T any](g *goDriver, name string) (T, error) {
	var zero T
	o, ok := g.objs[name]
	if !ok {
		return zero, fmt.Errorf("no object %s", name)
	}
	v, ok := o.(T)
	if !ok {
		return zero, fmt.Errorf("%s has the wrong kind", name)
	}
	return v, nil
}

func num(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %s", s)
	}
	return v, nil
}

func (g *goDriver) sge(s string) (verbs.SGE, []byte, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return verbs.SGE{}, nil, fmt.Errorf("bad sge %s", s)
	}
	m, err := get[*mr.MR](g, parts[0])
	if err != nil {
		return verbs.SGE{}, nil, err
	}
	off, err1 := num(parts[1])
	n, err2 := num(parts[2])
	if err1 != nil || err2 != nil || off+n > uint64(m.Len()) {
		return verbs.SGE{}, nil, fmt.Errorf("bad sge %s", s)
	}
	b := m.Bytes()
	return verbs.SGE{Addr: uint64(uintptr(unsafe.Pointer(&b[0]))) + off, Length: uint32(n), LKey: m.LKey()},
		b[off : off+n], nil
}

var sendOps = map[string]verbs.WROpcode{
	"send": verbs.WRSend, "send_imm": verbs.WRSendWithImm, "write": verbs.WRRDMAWrite,
	"write_imm": verbs.WRRDMAWriteWithImm, "read": verbs.WRRDMARead, "cas": verbs.WRAtomicCmpAndSwp,
	"faa": verbs.WRAtomicFetchAndAdd, "send_inv": verbs.WRSendWithInv,
}

func (g *goDriver) run(tok []string) error {
	n := len(tok)
	switch c := tok[0]; {
	case c == "open" && (n == 1 || n == 2 && tok[1] == "roce"):
		g.k.mu.Lock()
		g.k.roce = n == 2 // port 1 is a RoCE port
		g.k.mu.Unlock()
		dev := verbs.Device{Name: g.k.dev.Name, Driver: verbs.DriverMLX5, Path: "/dev/infiniband/uverbs0", Ports: 1}
		ctx, err := verbs.OpenDevice(dev)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		g.ctx = ctx
	case c == "pd" && n == 2:
		pd, err := g.ctx.AllocPD()
		if err != nil {
			return err
		}
		g.objs[tok[1]] = pd
	case c == "mr" && n >= 4:
		pd, err := get[*verbs.PD](g, tok[2])
		if err != nil {
			return err
		}
		size, err := num(tok[3])
		if err != nil || size == 0 || size > mrStride {
			return fmt.Errorf("mr size %s", tok[3])
		}
		access := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
		for _, w := range tok[4:] {
			v, ok := strings.CutPrefix(w, "access=")
			if !ok {
				return fmt.Errorf("unknown mr word %s", w)
			}
			a, err := num(v)
			if err != nil {
				return err
			}
			access = mr.Access(a)
		}
		buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("mmap of the MR buffer: %w", err)
		}
		g.bufs = append(g.bufs, buf)
		for i := range buf {
			buf[i] = byte(i*7 + 1)
		}
		m, err := mr.Register(pd, buf, access)
		if err != nil {
			return err
		}
		g.objs[tok[1]] = m
	case c == "cq" && (n == 3 || n == 4 && tok[3] == "channel"):
		cqe, err := num(tok[2])
		if err != nil {
			return err
		}
		o := cq.Options{CQE: int(cqe)}
		if n == 4 {
			if o.Channel, err = g.ctx.NewCompChannel(); err != nil {
				return fmt.Errorf("create_comp_channel: %w", err)
			}
		}
		q, err := cq.New(g.ctx, o)
		if err != nil {
			g.printf("cq = %v\n", err)
			return nil
		}
		g.printf("cq cqe=%d\n", q.CQE())
		g.objs[tok[1]] = q
		g.cqi[q] = g.ncq
		g.ncq++
	case c == "qp" && n >= 5:
		return g.newQP(tok)
	case c == "srq" && n == 5:
		pd, err := get[*verbs.PD](g, tok[2])
		if err != nil {
			return err
		}
		wr, err1 := num(tok[3])
		sge, err2 := num(tok[4])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad srq line")
		}
		s, err := srq.New(pd, srq.Attr{MaxWR: int(wr), MaxSGE: int(sge)})
		if err != nil {
			g.printf("srq = %v\n", err)
			return nil
		}
		g.objs[tok[1]] = s
	case c == "ah" && n >= 3:
		pd, err := get[*verbs.PD](g, tok[2])
		if err != nil {
			return err
		}
		a := verbs.AHAttr{Port: 1}
		for _, w := range tok[3:] {
			k, v, _ := strings.Cut(w, "=")
			if k == "global" {
				a.IsGlobal = true
				continue
			}
			if k == "dgid" {
				b, err := hex.DecodeString(v)
				if err != nil || len(b) != 16 {
					return fmt.Errorf("dgid wants 32 hex digits: %s", v)
				}
				copy(a.GRH.DGID[:], b)
				continue
			}
			x, err := num(v)
			if err != nil {
				return err
			}
			switch k {
			case "dlid":
				a.DLID = uint16(x)
			case "sl":
				a.SL = uint8(x)
			case "path":
				a.SrcPathBits = uint8(x)
			case "rate":
				a.StaticRate = uint8(x)
			case "sgid":
				a.GRH.SGIDIndex = uint8(x)
			case "flow":
				a.GRH.FlowLabel = uint32(x)
			case "hop":
				a.GRH.HopLimit = uint8(x)
			case "tclass":
				a.GRH.TrafficClass = uint8(x)
			default:
				return fmt.Errorf("unknown ah word %s", w)
			}
		}
		ah, err := pd.CreateAH(&a)
		if err != nil {
			g.printf("ah = %d\n", errnoOf(err, false))
			return nil
		}
		g.objs[tok[1]] = ah
	case c == "post_srq_recv" && n >= 3:
		s, err := get[*srq.SRQ](g, tok[1])
		if err != nil {
			return err
		}
		wrs, err := g.recvWRs(tok[2:])
		if err != nil {
			return err
		}
		err = s.PostRecv(wrs)
		bad := -1
		var pe *verbs.PostError
		if errors.As(err, &pe) {
			bad = pe.Index
		}
		g.printf("post_srq_recv = %d bad=%d\n", errnoOf(err, true), bad)
	case c == "modify" && n == 3:
		q, err := get[*qp.QP](g, tok[1])
		if err != nil {
			return err
		}
		return g.modify(q, tok[2])
	case c == "post_send" && n >= 2:
		return g.postSend(tok[1:])
	case c == "post_recv" && n >= 3:
		return g.postRecv(tok[1:])
	case c == "inject_cqe" && n >= 4:
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		p, err := get[*qp.QP](g, tok[2])
		if err != nil {
			return err
		}
		spec := fmt.Sprintf("qpn=%d %s", p.QPN(), strings.Join(tok[3:], " "))
		if err := g.k.inject(g.cqi[q], spec); err != nil {
			return fmt.Errorf("inject_cqe: bad CQE: %w", err)
		}
	case c == "poll" && n == 3:
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		want, err := num(tok[2])
		if err != nil || want > 64 {
			return fmt.Errorf("poll: at most 64")
		}
		wc := make([]verbs.WorkCompletion, want)
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(wc))), uintptr(len(wc))*unsafe.Sizeof(wc[0]))
		for i := range b {
			b[i] = 0xa5
		}
		got, err := q.Poll(wc)
		if errors.Is(err, verbs.ErrBadCompletion) {
			// libmlx5 fails the whole poll (CQ_POLL_ERR, -2) where
			// goverbs returns the completions before the bad entry with
			// the error.
			g.printf("poll = -2\n")
			return nil
		}
		if err != nil {
			g.printf("poll = %v\n", err)
			return nil
		}
		g.printf("poll = %d\n", got)
		for i := 0; i < got; i++ {
			w := &wc[i]
			// ibv_wc_flags: IBV_WC_WITH_INV is 1<<3, the kernel's (and
			// verbs') IB_WC_WITH_INVALIDATE 1<<2.
			flags := uint32(w.Flags) &^ uint32(verbs.WCWithInvalidate)
			if w.Flags&verbs.WCWithInvalidate != 0 {
				flags |= 1 << 3
			}
			g.printf("wc %d id=%d status=%d opcode=%d vendor_err=0x%x byte_len=0x%x imm=0x%x qp_num=0x%x src_qp=0x%x "+
				"wc_flags=0x%x pkey_index=0x%x slid=0x%x sl=0x%x dlid_path_bits=0x%x\n",
				i, w.WRID, int32(w.Status), int32(w.Opcode), w.VendorErr, w.ByteLen, w.ImmData, w.QPNum, w.SrcQP,
				flags, w.PkeyIndex, w.SLID, w.SL, w.DLIDPathBits)
		}
	case c == "event" && n == 2:
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		if err := g.k.event(g.cqi[q]); err != nil {
			return err
		}
	case c == "get_event" && n == 2:
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		if q.Channel() == nil {
			return fmt.Errorf("get_event: %s has no channel", tok[1])
		}
		got, err := cq.WaitChannel(context.Background(), q.Channel())
		if err != nil {
			g.printf("get_event = %v\n", err)
			return nil
		}
		if got != q {
			return fmt.Errorf("get_event: an event of another CQ")
		}
		g.printf("get_event = 0\n")
	case c == "resize" && n == 3:
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		x, err := num(tok[2])
		if err != nil {
			return err
		}
		if err := q.Resize(int(x)); err != nil {
			g.printf("resize = %v cqe=%d\n", err, q.CQE())
		} else {
			g.printf("resize = 0 cqe=%d\n", q.CQE())
		}
	case c == "arm" && (n == 2 || n == 3):
		q, err := get[*cq.CQ](g, tok[1])
		if err != nil {
			return err
		}
		sol := n == 3 && tok[2] == "solicited"
		if err := q.ReqNotify(sol); err != nil {
			g.printf("arm = %v\n", err)
		} else {
			g.printf("arm = 0\n")
		}
	case c == "destroy" && n == 2:
		o, ok := g.objs[tok[1]]
		if !ok {
			return fmt.Errorf("no object %s", tok[1])
		}
		var err error
		switch o := o.(type) {
		case *qp.QP:
			err = o.Close()
		case *cq.CQ:
			err = o.Close()
		case *mr.MR:
			err = o.Close()
		case *verbs.PD:
			err = o.Close()
		case *srq.SRQ:
			err = o.Close()
		case *verbs.AH:
			err = o.Close()
		}
		if err != nil {
			g.printf("destroy = %v\n", err)
		} else {
			g.printf("destroy = 0\n")
		}
		delete(g.objs, tok[1])
	default:
		return fmt.Errorf("bad line: %s", strings.Join(tok, " "))
	}
	return nil
}

func (g *goDriver) newQP(tok []string) error {
	pd, err := get[*verbs.PD](g, tok[2])
	if err != nil {
		return err
	}
	scq, err := get[*cq.CQ](g, tok[3])
	if err != nil {
		return err
	}
	rcq, err := get[*cq.CQ](g, tok[4])
	if err != nil {
		return err
	}
	o := qp.Options{Type: qp.RC, SendCQ: scq, RecvCQ: rcq,
		Caps: qp.Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
	for _, w := range tok[5:] {
		k, v, _ := strings.Cut(w, "=")
		var x uint64
		if v != "" && k != "srq" {
			if x, err = num(v); err != nil {
				return err
			}
		}
		switch k {
		case "rc":
			o.Type = qp.RC
		case "uc":
			o.Type = qp.UC
		case "ud":
			o.Type = qp.UD
		case "sigall":
			o.SigAll = true
		case "send":
			o.Caps.MaxSendWR = int(x)
		case "recv":
			o.Caps.MaxRecvWR = int(x)
		case "sge":
			o.Caps.MaxSendSGE = int(x)
		case "rsge":
			o.Caps.MaxRecvSGE = int(x)
		case "inline":
			o.Caps.MaxInlineData = int(x)
		case "srq":
			s, err := get[*srq.SRQ](g, v)
			if err != nil {
				return err
			}
			o.SRQ = s
			o.Caps.MaxRecvWR, o.Caps.MaxRecvSGE = 0, 0
		default:
			return fmt.Errorf("unknown qp word %s", w)
		}
	}
	q, err := qp.New(pd, o)
	if err != nil {
		g.printf("qp = %v\n", err)
		return nil
	}
	c := q.Caps()
	// libmlx5 reports the send SGEs asked for and the receive queue's
	// room (ibv_qp_init_attr.cap after ibv_create_qp).
	g.printf("qp cap=%d,%d,%d,%d,%d\n", c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData)
	g.objs[tok[1]] = q
	return nil
}

func (g *goDriver) modify(q *qp.QP, to string) error {
	var a qp.Attr
	var mask qp.AttrMask
	if q.Type() == qp.UD && (to == "init" || to == "rtr" || to == "rts") {
		switch to {
		case "init":
			a = qp.Attr{State: qp.Init, Port: 1, QKey: 0x11111111}
			mask = qp.MaskState | qp.MaskPkeyIndex | qp.MaskPort | qp.MaskQKey
		case "rtr":
			a, mask = qp.Attr{State: qp.RTR}, qp.MaskState
		case "rts":
			a, mask = qp.Attr{State: qp.RTS}, qp.MaskState|qp.MaskSQPSN
		}
		if err := q.Modify(&a, mask); err != nil {
			g.printf("modify %s = %v\n", to, err)
			return nil
		}
		g.printf("modify %s = 0\n", to)
		return nil
	}
	switch to {
	case "init":
		a = qp.Attr{State: qp.Init, Port: 1, Access: mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic}
		mask = qp.MaskState | qp.MaskPkeyIndex | qp.MaskPort | qp.MaskAccessFlags
	case "rtr":
		a = qp.Attr{State: qp.RTR, PathMTU: verbs.MTU1024, DestQPN: 0x777, MaxDestRDAtomic: 1, MinRNRTimer: 12,
			Path: verbs.AHAttr{DLID: 2, Port: 1}}
		mask = qp.MaskState | qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN | qp.MaskMaxDestRDAtomic | qp.MaskMinRNRTimer
	case "rts":
		a = qp.Attr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1}
		mask = qp.MaskState | qp.MaskTimeout | qp.MaskRetryCnt | qp.MaskRNRRetry | qp.MaskSQPSN | qp.MaskMaxQPRDAtomic
	case "err":
		a, mask = qp.Attr{State: qp.Error}, qp.MaskState
	case "reset":
		a, mask = qp.Attr{State: qp.Reset}, qp.MaskState
	default:
		return fmt.Errorf("unknown state %s", to)
	}
	if err := q.Modify(&a, mask); err != nil {
		g.printf("modify %s = %v\n", to, err)
		return nil
	}
	g.printf("modify %s = 0\n", to)
	return nil
}

func (g *goDriver) postSend(tok []string) error {
	q, err := get[*qp.QP](g, tok[0])
	if err != nil {
		return err
	}
	var wrs []verbs.SendWR
	for i := 1; i < len(tok); i++ {
		if tok[i] == "|" {
			continue
		}
		op, ok := sendOps[tok[i]]
		if !ok {
			return fmt.Errorf("unknown opcode %s", tok[i])
		}
		wr := verbs.SendWR{Opcode: op}
		inline := false
		var data []byte
		for i++; i < len(tok) && tok[i] != "|"; i++ {
			k, v, _ := strings.Cut(tok[i], "=")
			var x uint64
			if v != "" && k != "sge" && k != "ah" {
				if x, err = num(v); err != nil {
					return err
				}
			}
			switch k {
			case "id":
				wr.WRID = x
			case "sig":
				wr.Flags |= verbs.SendSignaled
			case "inline":
				inline = true
			case "fence":
				wr.Flags |= verbs.SendFence
			case "solicited":
				wr.Flags |= verbs.SendSolicited
			case "imm":
				wr.Imm = uint32(x)
			case "inv":
				wr.InvalidateRKey = uint32(x)
			case "sge":
				s, b, err := g.sge(v)
				if err != nil {
					return err
				}
				wr.SGList = append(wr.SGList, s)
				data = append(data, b...)
			case "raddr":
				wr.RemoteAddr = x
			case "rkey":
				wr.RKey = uint32(x)
			case "cmp":
				wr.CompareAdd = x
			case "ah":
				ah, err := get[*verbs.AH](g, v)
				if err != nil {
					return err
				}
				wr.AH = ah
			case "rqpn":
				wr.RemoteQPN = uint32(x)
			case "qkey":
				wr.RemoteQKey = uint32(x)
			case "swap":
				wr.Swap = x
			default:
				return fmt.Errorf("unknown send word %s", tok[i])
			}
		}
		i--
		if inline {
			wr.Flags |= verbs.SendInline
			wr.InlineData, wr.SGList = data, nil
			if wr.InlineData == nil {
				wr.InlineData = []byte{}
			}
		}
		wrs = append(wrs, wr)
	}
	err = q.PostSend(wrs)
	bad := -1
	var pe *verbs.PostError
	if errors.As(err, &pe) {
		bad = pe.Index
	}
	g.printf("post_send = %d bad=%d\n", errnoOf(err, false), bad)
	return nil
}

func (g *goDriver) postRecv(tok []string) error {
	q, err := get[*qp.QP](g, tok[0])
	if err != nil {
		return err
	}
	wrs, err := g.recvWRs(tok[1:])
	if err != nil {
		return err
	}
	err = q.PostRecv(wrs)
	bad := -1
	var pe *verbs.PostError
	if errors.As(err, &pe) {
		bad = pe.Index
	}
	g.printf("post_recv = %d bad=%d\n", errnoOf(err, true), bad)
	return nil
}

// recvWRs parses a list of receive work requests.
func (g *goDriver) recvWRs(tok []string) ([]verbs.RecvWR, error) {
	wrs := []verbs.RecvWR{{}}
	for _, w := range tok {
		if w == "|" {
			wrs = append(wrs, verbs.RecvWR{})
			continue
		}
		wr := &wrs[len(wrs)-1]
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "id":
			x, err := num(v)
			if err != nil {
				return nil, err
			}
			wr.WRID = x
		case "sge":
			s, _, err := g.sge(v)
			if err != nil {
				return nil, err
			}
			wr.SGList = append(wr.SGList, s)
		default:
			return nil, fmt.Errorf("unknown recv word %s", w)
		}
	}
	return wrs, nil
}

// errnoOf is the errno libmlx5 returns for what goverbs reports as err
// (0 for nil): a full queue is ENOMEM; too many SGEs ENOMEM on the send
// queue and EINVAL on the receive queue; inline data too long ENOMEM.
func errnoOf(err error, recv bool) int {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	switch {
	case errors.Is(err, verbs.ErrTooManySGE) && recv:
		return int(unix.EINVAL)
	case errors.Is(err, verbs.ErrQueueFull), errors.Is(err, verbs.ErrInlineTooLarge), errors.Is(err, verbs.ErrTooManySGE):
		return int(unix.ENOMEM)
	}
	return int(unix.EINVAL)
}

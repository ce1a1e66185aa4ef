package difftest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// device is the fake device, from the description file both fake kernels
// read (testdata/device.txt; c/device.c's struct dev has the same keys).
type device struct {
	Name, Modalias                                            string
	NodeGUID, SysImageGUID, FWVer                             uint64
	VendorID, VendorPartID, HWVer                             uint32
	MaxQP, MaxQPWR, DeviceCapFlags, MaxSGE, MaxSGERD, MaxCQ   uint32
	MaxCQE, MaxMR, MaxPD, MaxQPRDAtom, MaxQPInitRDAtom        uint32
	AtomicCap, MaxSRQ, MaxSRQWR, MaxSRQSGE, MaxPkeys          uint32
	LocalCAAckDelay, NumCompVectors                           uint32
	QPTabSize, BfRegSize, TotBfregs, CacheLineSize            uint32
	MaxSqDescSz, MaxRqDescSz, MaxSendWQEBB, MaxRecvWR         uint32
	MaxSRQRecvWR, CQEVersion, CmdsSuppUHW, EthMinInline       uint32
	LogUARSize, NumUARsPerPage                                uint32
	LinkLayer, PortState, MaxMTU, ActiveMTU, GIDTblLen        uint32
	PkeyTblLen, LID, PortCapFlags, MaxMsgSz                   uint32
	PDNBase, CQNBase, QPNBase, MkeyBase, FirstBfreg, SRQNBase uint32

	BoardID                                                        string
	MaxMRSize, PageSizeCap                                         uint64
	MaxMW, MaxMcastGrp, MaxMcastQPAttach, MaxTotalMcastQPAttach    uint32
	MaxAH                                                          uint32
	ODPGeneralCaps, TimestampMask, HCACoreClock, DeviceCapFlagsEx  uint64
	MaxDMSize                                                      uint64
	RCODPCaps, UCODPCaps, UDODPCaps, XRCODPCaps                    uint32
	RSSSupportedQPTs, MaxRWQIndirectionTables, MaxRWQIndTableSize  uint32
	MaxWQTypeRQ, RawPacketCaps                                     uint32
	TMMaxRndvHdrSize, TMMaxNumTags, TMFlags, TMMaxOps, TMMaxSGE    uint32
	MaxCQModerationCount, MaxCQModerationPeriod                    uint32
	RxHashFieldsMask                                               uint64
	MaxTSO, TSOSupportedQPTs, RxHashFunction                       uint32
	CQECompMaxNum, CQECompFormats                                  uint32
	QPRateLimitMin, QPRateLimitMax, PPSupportedQPTs                uint32
	SMLID, LMC, MaxVLNum, SMSL, SubnetTimeout                      uint32
	PhysState, ActiveWidth, ActiveSpeed, BadPkeyCntr, QkeyViolCntr uint32
	GIDs                                                           [maxGIDs][16]byte // gidN; zero: none
	// port 1 as a RoCE port ("open roce")
	RoCEPortCapFlags, RoCEGIDV2            uint32
	RoCENeighMAC                           uint64
	RoCEGID0, RoCEGID1, RoCEGID2, RoCEGID3 string
}

// maxGIDs is the length of port 1's GID table in sysfs (c/fake.h's
// MAX_GIDS).
const maxGIDs = 128

// deviceKeys maps the file's keys to device's fields.
var deviceKeys = map[string]string{
	"name": "Name", "modalias": "Modalias", "node_guid": "NodeGUID", "sys_image_guid": "SysImageGUID",
	"fw_ver": "FWVer", "vendor_id": "VendorID", "vendor_part_id": "VendorPartID", "hw_ver": "HWVer",
	"max_qp": "MaxQP", "max_qp_wr": "MaxQPWR", "device_cap_flags": "DeviceCapFlags", "max_sge": "MaxSGE",
	"max_sge_rd": "MaxSGERD", "max_cq": "MaxCQ", "max_cqe": "MaxCQE", "max_mr": "MaxMR", "max_pd": "MaxPD",
	"max_qp_rd_atom": "MaxQPRDAtom", "max_qp_init_rd_atom": "MaxQPInitRDAtom", "atomic_cap": "AtomicCap",
	"max_srq": "MaxSRQ", "max_srq_wr": "MaxSRQWR", "max_srq_sge": "MaxSRQSGE", "max_pkeys": "MaxPkeys",
	"local_ca_ack_delay": "LocalCAAckDelay", "num_comp_vectors": "NumCompVectors",
	"qp_tab_size": "QPTabSize", "bf_reg_size": "BfRegSize", "tot_bfregs": "TotBfregs",
	"cache_line_size": "CacheLineSize", "max_sq_desc_sz": "MaxSqDescSz", "max_rq_desc_sz": "MaxRqDescSz",
	"max_send_wqebb": "MaxSendWQEBB", "max_recv_wr": "MaxRecvWR", "max_srq_recv_wr": "MaxSRQRecvWR",
	"cqe_version": "CQEVersion", "cmds_supp_uhw": "CmdsSuppUHW", "eth_min_inline": "EthMinInline",
	"log_uar_size": "LogUARSize", "num_uars_per_page": "NumUARsPerPage", "link_layer": "LinkLayer",
	"port_state": "PortState", "max_mtu": "MaxMTU", "active_mtu": "ActiveMTU", "gid_tbl_len": "GIDTblLen",
	"pkey_tbl_len": "PkeyTblLen", "lid": "LID", "port_cap_flags": "PortCapFlags", "max_msg_sz": "MaxMsgSz",
	"pdn_base": "PDNBase", "cqn_base": "CQNBase", "qpn_base": "QPNBase", "mkey_base": "MkeyBase",
	"first_bfreg": "FirstBfreg", "srqn_base": "SRQNBase",
	"board_id": "BoardID", "max_mr_size": "MaxMRSize", "page_size_cap": "PageSizeCap", "max_mw": "MaxMW",
	"max_mcast_grp": "MaxMcastGrp", "max_mcast_qp_attach": "MaxMcastQPAttach",
	"max_total_mcast_qp_attach": "MaxTotalMcastQPAttach", "max_ah": "MaxAH",
	"odp_general_caps": "ODPGeneralCaps", "timestamp_mask": "TimestampMask", "hca_core_clock": "HCACoreClock",
	"device_cap_flags_ex": "DeviceCapFlagsEx", "max_dm_size": "MaxDMSize", "rc_odp_caps": "RCODPCaps",
	"uc_odp_caps": "UCODPCaps", "ud_odp_caps": "UDODPCaps", "xrc_odp_caps": "XRCODPCaps",
	"rss_supported_qpts": "RSSSupportedQPTs", "max_rwq_indirection_tables": "MaxRWQIndirectionTables",
	"max_rwq_indirection_table_size": "MaxRWQIndTableSize", "max_wq_type_rq": "MaxWQTypeRQ",
	"raw_packet_caps": "RawPacketCaps", "tm_max_rndv_hdr_size": "TMMaxRndvHdrSize",
	"tm_max_num_tags": "TMMaxNumTags", "tm_flags": "TMFlags", "tm_max_ops": "TMMaxOps", "tm_max_sge": "TMMaxSGE",
	"max_cq_moderation_count": "MaxCQModerationCount", "max_cq_moderation_period": "MaxCQModerationPeriod",
	"rx_hash_fields_mask": "RxHashFieldsMask", "max_tso": "MaxTSO", "tso_supported_qpts": "TSOSupportedQPTs",
	"rx_hash_function": "RxHashFunction", "cqe_comp_max_num": "CQECompMaxNum",
	"cqe_comp_formats": "CQECompFormats", "qp_rate_limit_min": "QPRateLimitMin",
	"qp_rate_limit_max": "QPRateLimitMax", "pp_supported_qpts": "PPSupportedQPTs", "sm_lid": "SMLID",
	"lmc": "LMC", "max_vl_num": "MaxVLNum", "sm_sl": "SMSL", "subnet_timeout": "SubnetTimeout",
	"phys_state": "PhysState", "active_width": "ActiveWidth", "active_speed": "ActiveSpeed",
	"bad_pkey_cntr": "BadPkeyCntr", "qkey_viol_cntr": "QkeyViolCntr",
	"roce_port_cap_flags": "RoCEPortCapFlags", "roce_gid_v2": "RoCEGIDV2", "roce_neigh_mac": "RoCENeighMAC",
	"roce_gid0": "RoCEGID0", "roce_gid1": "RoCEGID1", "roce_gid2": "RoCEGID2", "roce_gid3": "RoCEGID3",
}

// parseGID parses a GID as sysfs writes it: eight groups of four hex
// digits.
func parseGID(s string) ([16]byte, error) {
	var g [16]byte
	parts := strings.Split(s, ":")
	if len(parts) != 8 {
		return g, fmt.Errorf("bad GID %q", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil || len(p) != 4 {
			return g, fmt.Errorf("bad GID %q", s)
		}
		binary.BigEndian.PutUint16(g[2*i:], uint16(v))
	}
	return g, nil
}

func loadDevice(path string) (*device, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &device{}
	v := reflect.ValueOf(d).Elem()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		if len(w) != 2 {
			return nil, fmt.Errorf("%s:%d: want key value", path, n)
		}
		if idx, ok := strings.CutPrefix(w[0], "gid"); ok && idx != "" && idx[0] >= '0' && idx[0] <= '9' {
			i, err := strconv.ParseUint(idx, 10, 8)
			if err != nil || i >= maxGIDs {
				return nil, fmt.Errorf("%s:%d: bad GID index %s", path, n, w[0])
			}
			if d.GIDs[i], err = parseGID(w[1]); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			continue
		}
		field, ok := deviceKeys[w[0]]
		if !ok {
			return nil, fmt.Errorf("%s:%d: unknown key %s", path, n, w[0])
		}
		fv := v.FieldByName(field)
		if fv.Kind() == reflect.String {
			fv.SetString(w[1])
			continue
		}
		x, err := strconv.ParseUint(w[1], 0, fv.Type().Bits())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		fv.SetUint(x)
	}
	return d, sc.Err()
}

// region is memory whose bytes the trace shows.
type region struct {
	name   string
	mem    []byte
	shadow []byte
	uar    bool
	live   bool
}

type fakeCQ struct {
	live     bool
	chanW    int    // the write end of its completion channel, or -1
	userH    uint64 // what an event carries
	cqn      uint32
	nent     uint32
	cqeSize  uint32
	buf      []byte
	pi       uint32
	handle   uint32
	regNames string
}

type fakeQP struct {
	live   bool
	qpn    uint32
	uidx   uint32
	handle uint32
}

// fakeKernel answers for the uverbs driver of one mlx5 device
// (uverbshook.Kernel), as c/fake.c does for libibverbs, and writes the
// same trace.
type fakeKernel struct {
	dev   *device
	out   *strings.Builder
	sysfs string // the sysfs tree makeSysfs wrote, or ""
	roce  bool   // port 1 is a RoCE port ("open roce")

	mu      sync.Mutex
	fds     map[int]bool
	regions []*region
	pages   []uintptr
	handle  uint32
	npd     uint32
	nmr     uint32
	nsrq    uint32
	cqs     []*fakeCQ
	qps     []*fakeQP
	objName map[uint32]string // handle -> "cqN"/"qpN"
	maps    [][]byte
	chans   map[int]int // completion channel read end -> write end
}

func newFakeKernel(dev *device, out *strings.Builder) *fakeKernel {
	return &fakeKernel{dev: dev, out: out, fds: map[int]bool{}, handle: 1, objName: map[uint32]string{}, chans: map[int]int{}}
}

func (k *fakeKernel) printf(format string, args ...any) { fmt.Fprintf(k.out, format, args...) }

// makeSysfs writes the device's sysfs tree under root, as c/fake.c's
// make_sysfs does for libibverbs, and makes it the kernel's
// (uverbshook.Sysfs): verbs.Devices then lists the device from it. Call
// it before installing the kernel.
func (k *fakeKernel) makeSysfs(root string) error {
	d := k.dev
	guid := func(v uint64) string {
		return fmt.Sprintf("%04x:%04x:%04x:%04x\n", v>>48&0xffff, v>>32&0xffff, v>>16&0xffff, v&0xffff)
	}
	ib := filepath.Join("class/infiniband", d.Name)
	files := [][2]string{
		{"class/infiniband_verbs/abi_version", "6\n"},
		{"class/infiniband_verbs/uverbs0/ibdev", d.Name + "\n"},
		{"class/infiniband_verbs/uverbs0/dev", "1:3\n"},
		{"class/infiniband_verbs/uverbs0/abi_version", "1\n"},
		{filepath.Join(ib, "node_type"), "1: CA\n"},
		{filepath.Join(ib, "node_guid"), guid(d.NodeGUID)},
		{filepath.Join(ib, "sys_image_guid"), guid(d.SysImageGUID)},
		{filepath.Join(ib, "device/modalias"), d.Modalias + "\n"},
	}
	if d.BoardID != "" {
		files = append(files, [2]string{filepath.Join(ib, "board_id"), d.BoardID + "\n"})
	}
	for i, g := range d.GIDs {
		s := make([]string, 8)
		for j := range s {
			s[j] = fmt.Sprintf("%04x", binary.BigEndian.Uint16(g[2*j:]))
		}
		files = append(files, [2]string{filepath.Join(ib, "ports/1/gids", strconv.Itoa(i)), strings.Join(s, ":") + "\n"})
	}
	for _, f := range files {
		p := filepath.Join(root, f[0])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f[1]), 0o644); err != nil {
			return err
		}
	}
	if err := os.Symlink("../../../../bus/pci/drivers/mlx5_core", filepath.Join(root, ib, "device/driver")); err != nil {
		return err
	}
	k.sysfs = root
	return nil
}

// SysfsRoot is uverbshook.Sysfs.
func (k *fakeKernel) SysfsRoot() string { return k.sysfs }

func (k *fakeKernel) Open(path string) (int, error) {
	if path != "/dev/infiniband/uverbs0" {
		return -1, unix.ENOENT
	}
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	k.mu.Lock()
	k.fds[fd] = true
	k.mu.Unlock()
	return fd, nil
}

func (k *fakeKernel) Answers(raw int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fds[raw]
}

// forget drops raw after the test closed it.
func (k *fakeKernel) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fds = map[int]bool{}
	for _, m := range k.maps {
		unix.Munmap(m)
	}
	k.maps = nil
	for _, w := range k.chans {
		unix.Close(w)
	}
	k.chans = map[int]int{}
}

// event is fk_event.
func (k *fakeKernel) event(cq int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cq < 0 || cq >= len(k.cqs) || !k.cqs[cq].live || k.cqs[cq].chanW < 0 {
		return fmt.Errorf("event: no CQ %d with a channel", cq)
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], k.cqs[cq].userH)
	_, err := unix.Write(k.cqs[cq].chanW, b[:])
	return err
}

func (k *fakeKernel) Write(int, []byte) unix.Errno { return unix.ENOSYS }

func (k *fakeKernel) Mmap(raw int, offset int64, size int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	pg := uint64(offset) / 4096
	k.mu.Lock()
	k.addRegion(fmt.Sprintf("uar%d.%d", pg>>8, pg&0xff), m, true)
	k.mu.Unlock()
	return m, nil
}

func (k *fakeKernel) addRegion(name string, mem []byte, uar bool) {
	r := &region{name: name, mem: mem, shadow: append([]byte(nil), mem...), uar: uar, live: true}
	k.regions = append(k.regions, r)
}

// dropRegions is c/fake.c's drop_regions.
func (k *fakeKernel) dropRegions(prefix string) {
	for _, r := range k.regions {
		if !r.live || !strings.HasPrefix(r.name, prefix+".") {
			continue
		}
		r.live = false
		if r.name == prefix+".buf" {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))) &^ 4095
			for j := range k.pages {
				if k.pages[j] == p {
					k.pages[j] = 1 // retired
				}
			}
		}
	}
}

// sym names an address by the order in which its page first appeared.
func (k *fakeKernel) sym(a uint64) string {
	if a == 0 {
		return "0"
	}
	p := uintptr(a) &^ 4095
	i := 0
	for ; i < len(k.pages); i++ {
		if k.pages[i] == p {
			break
		}
	}
	if i == len(k.pages) {
		k.pages = append(k.pages, p)
	}
	return fmt.Sprintf("P%d+0x%x", i, uintptr(a)-p)
}

func (k *fakeKernel) traceCmd(name string, in, out []byte, addrs []int, extra string) {
	buf := append([]byte(nil), in...)
	k.printf("cmd %s", name)
	if extra != "" {
		k.printf(" %s", extra)
	}
	for _, off := range addrs {
		if off+8 > len(buf) {
			continue
		}
		a := binary.NativeEndian.Uint64(buf[off:])
		clear(buf[off : off+8])
		k.printf(" @%d=%s", off, k.sym(a))
	}
	k.printf(" in=%x out=%x\n", buf, out)
}

// dump is fk_dump.
func (k *fakeKernel) dump(label string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.printf("dump %s\n", label)
	for _, r := range k.regions {
		if !r.live {
			continue
		}
		for off := 0; off < len(r.mem); off += 16 {
			end := min(off+16, len(r.mem))
			if string(r.mem[off:end]) == string(r.shadow[off:end]) {
				continue
			}
			k.printf("  %s+0x%04x %x\n", r.name, off, r.mem[off:end])
		}
		if r.uar {
			clear(r.mem)
			clear(r.shadow)
		} else {
			copy(r.shadow, r.mem)
		}
	}
}

// inject is fk_inject.
func (k *fakeKernel) inject(cq int, spec string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cq < 0 || cq >= len(k.cqs) || !k.cqs[cq].live {
		return fmt.Errorf("inject: no CQ %d", cq)
	}
	c := k.cqs[cq]
	cqe, qpn, hasUIdx, err := fakeCQE(spec)
	if err != nil {
		return err
	}
	for _, q := range k.qps {
		if q.live && q.qpn == qpn && !hasUIdx {
			v := binary.BigEndian.Uint32(cqe[32:])
			binary.BigEndian.PutUint32(cqe[32:], v&0xff000000|q.uidx)
		}
	}
	idx := c.pi & (c.nent - 1)
	slot := c.buf[int(idx)*int(c.cqeSize)+int(c.cqeSize)-64:]
	owner := byte((c.pi / c.nent) & 1)
	copy(slot[:63], cqe[:63])
	slot[63] = cqe[63]&0xfe | owner
	c.pi++
	return nil
}

// fakeCQE is c/device.c's fake_cqe.
func fakeCQE(spec string) (cqe [64]byte, qpn uint32, hasUIdx bool, err error) {
	kinds := map[string]int{"req": 0, "resp_write_imm": 1, "resp_send": 2, "resp_send_imm": 3,
		"resp_send_inv": 4, "req_err": 13, "resp_err": 14, "invalid": 15}
	op := -1
	var wqe, bytes, imm, synd, vendor, sop, flags, rqpn, slid, opbits, uidx uint32
	for _, tok := range strings.Fields(spec) {
		key, val, ok := strings.Cut(tok, "=")
		if op < 0 && !ok {
			if o, ok := kinds[tok]; ok {
				op = o
				continue
			}
			n, err := strconv.ParseUint(tok, 0, 32)
			if err != nil || n > 15 {
				return cqe, 0, false, fmt.Errorf("cqe: bad kind %s", tok)
			}
			op = int(n)
			continue
		}
		if !ok {
			return cqe, 0, false, fmt.Errorf("cqe: bad word %s", tok)
		}
		n, err := strconv.ParseUint(val, 0, 32)
		if err != nil {
			return cqe, 0, false, fmt.Errorf("cqe: bad value %s", val)
		}
		v := uint32(n)
		switch key {
		case "qpn":
			qpn = v
		case "wqe":
			wqe = v
		case "bytes":
			bytes = v
		case "imm":
			imm = v
		case "syndrome":
			synd = v
		case "vendor":
			vendor = v
		case "sop":
			sop = v
		case "flags":
			flags = v
		case "rqpn":
			rqpn = v
		case "slid":
			slid = v
		case "opbits":
			opbits = v
		case "uidx":
			uidx, hasUIdx = v, true
		default:
			return cqe, 0, false, fmt.Errorf("cqe: unknown key %s", key)
		}
	}
	if op < 0 {
		return cqe, 0, false, errors.New("cqe: no kind")
	}
	be := binary.BigEndian
	be.PutUint32(cqe[32:], uidx&0xffffff)
	be.PutUint16(cqe[22:], uint16(slid))
	be.PutUint32(cqe[24:], flags<<24|rqpn&0xffffff)
	be.PutUint32(cqe[36:], imm)
	be.PutUint32(cqe[44:], bytes)
	be.PutUint32(cqe[56:], sop<<24|qpn&0xffffff)
	be.PutUint16(cqe[60:], uint16(wqe))
	if op == 13 || op == 14 {
		cqe[54] = byte(vendor)
		cqe[55] = byte(synd)
	}
	cqe[63] = byte(op<<4) | byte(opbits&0xe)
	return cqe, qpn, hasUIdx, nil
}

// attrs is a decoded ioctl request.
type attrs struct {
	hdr *uverbs.IoctlHdr
	a   []uverbs.Attr
}

func (r attrs) find(id uint16) *uverbs.Attr {
	for i := range r.a {
		if r.a[i].Attr_id == id {
			return &r.a[i]
		}
	}
	return nil
}

// in returns an input attribute's bytes.
func (r attrs) in(id uint16) []byte {
	a := r.find(id)
	if a == nil {
		return nil
	}
	if a.Len <= 8 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.Data)), a.Len)
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&a.Data))), a.Len)
}

// out writes b into an output attribute (as much as fits) and marks it
// valid.
func (r attrs) out(id uint16, b []byte) {
	a := r.find(id)
	if a == nil {
		return
	}
	dst := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&a.Data))), a.Len)
	clear(dst)
	copy(dst, b)
	a.Flags |= uverbs.UVERBS_ATTR_F_VALID_OUTPUT
}

func (r attrs) outLen(id uint16) int {
	if a := r.find(id); a != nil {
		return int(a.Len)
	}
	return 0
}

func (r attrs) setData(id uint16, v uint64) {
	if a := r.find(id); a != nil {
		a.Data = v
	}
}

func bytesOf[T any](p *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p)) }

func (k *fakeKernel) newHandle(name string) uint32 {
	h := k.handle
	k.handle++
	if name != "" {
		k.objName[h] = name
	}
	return h
}

func (k *fakeKernel) Ioctl(raw int, req unsafe.Pointer) unix.Errno {
	k.mu.Lock()
	defer k.mu.Unlock()
	hdr := (*uverbs.IoctlHdr)(req)
	if int(hdr.Length) != int(unsafe.Sizeof(*hdr))+int(hdr.Num_attrs)*int(unsafe.Sizeof(uverbs.Attr{})) {
		return unix.EINVAL
	}
	if hdr.Driver_id != uverbs.RDMA_DRIVER_MLX5 {
		return unix.EINVAL
	}
	r := attrs{hdr: hdr, a: unsafe.Slice((*uverbs.Attr)(unsafe.Add(req, unsafe.Sizeof(*hdr))), hdr.Num_attrs)}
	uhwIn := r.in(uverbs.UVERBS_ATTR_UHW_IN)
	switch {
	case hdr.Object_id == uverbs.UVERBS_OBJECT_DEVICE && hdr.Method_id == uverbs.UVERBS_METHOD_GET_CONTEXT:
		var resp [72]byte
		d := k.dev
		le := binary.NativeEndian
		le.PutUint32(resp[0:], d.QPTabSize)
		le.PutUint32(resp[4:], d.BfRegSize)
		le.PutUint32(resp[8:], d.TotBfregs)
		le.PutUint32(resp[12:], d.CacheLineSize)
		le.PutUint16(resp[16:], uint16(d.MaxSqDescSz))
		le.PutUint16(resp[18:], uint16(d.MaxRqDescSz))
		le.PutUint32(resp[20:], d.MaxSendWQEBB)
		le.PutUint32(resp[24:], d.MaxRecvWR)
		le.PutUint32(resp[28:], d.MaxSRQRecvWR)
		le.PutUint16(resp[32:], 1)
		le.PutUint32(resp[40:], 72)
		resp[44] = byte(d.CQEVersion)
		resp[45] = byte(d.CmdsSuppUHW)
		resp[46] = byte(d.EthMinInline)
		le.PutUint32(resp[56:], d.LogUARSize)
		le.PutUint32(resp[60:], d.NumUARsPerPage)
		if len(uhwIn) >= 12 && le.Uint32(uhwIn[8:])&1 != 0 { // MLX5_IB_ALLOC_UCTX_DEVX
			return unix.EPERM
		}
		var ncv [4]byte
		le.PutUint32(ncv[:], d.NumCompVectors)
		r.out(uverbs.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, ncv[:])
		r.out(uverbs.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, make([]byte, 8))
		r.out(uverbs.UVERBS_ATTR_UHW_OUT, resp[:])
		k.traceCmd("GET_CONTEXT", uhwIn, resp[:], nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_ASYNC_EVENT:
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return err.(unix.Errno)
		}
		r.setData(uverbs.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(fd))
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_DEVICE && hdr.Method_id == uverbs.UVERBS_METHOD_QUERY_PORT:
		var resp uverbs.QueryPortRespEx
		l := &resp.Legacy_resp
		d := k.dev
		l.Port_cap_flags, l.Max_msg_sz, l.Gid_tbl_len = d.PortCapFlags, d.MaxMsgSz, d.GIDTblLen
		l.Lid, l.State, l.Max_mtu, l.Active_mtu = uint16(d.LID), uint8(d.PortState), uint8(d.MaxMTU), uint8(d.ActiveMTU)
		l.Pkey_tbl_len, l.Link_layer = uint16(d.PkeyTblLen), uint8(d.LinkLayer)
		l.Sm_lid, l.Lmc, l.Max_vl_num, l.Sm_sl = uint16(d.SMLID), uint8(d.LMC), uint8(d.MaxVLNum), uint8(d.SMSL)
		l.Subnet_timeout, l.Bad_pkey_cntr, l.Qkey_viol_cntr = uint8(d.SubnetTimeout), d.BadPkeyCntr, d.QkeyViolCntr
		l.Phys_state, l.Active_width, l.Active_speed = uint8(d.PhysState), uint8(d.ActiveWidth), uint8(d.ActiveSpeed)
		if k.roce {
			k.rocePort(l)
		}
		port := r.in(uverbs.UVERBS_ATTR_QUERY_PORT_PORT_NUM)
		if len(port) < 1 || port[0] != 1 {
			return unix.EINVAL
		}
		r.out(uverbs.UVERBS_ATTR_QUERY_PORT_RESP, bytesOf(&resp))
		k.traceCmd("QUERY_PORT", uhwIn, nil, nil, "port=1")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_DEVICE && hdr.Method_id == uverbs.UVERBS_METHOD_QUERY_GID_TABLE:
		return k.queryGIDTable(r)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_DEVICE && hdr.Method_id == uverbs.UVERBS_METHOD_INVOKE_WRITE:
		cmd := binary.NativeEndian.Uint64(r.in(uverbs.UVERBS_ATTR_WRITE_CMD))
		return k.invokeWrite(uint32(cmd), r, uhwIn)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_CQ && hdr.Method_id == uverbs.UVERBS_METHOD_CQ_CREATE:
		return k.createCQ(r, uhwIn)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_QP && hdr.Method_id == uverbs.UVERBS_METHOD_QP_CREATE:
		return k.createQP(r, uhwIn)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_QP && hdr.Method_id == uverbs.UVERBS_METHOD_QP_DESTROY:
		k.destroy(r)
		r.out(uverbs.UVERBS_ATTR_DESTROY_QP_RESP, make([]byte, 4))
		k.traceCmd("DESTROY_QP", uhwIn, nil, nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_CQ && hdr.Method_id == uverbs.UVERBS_METHOD_CQ_DESTROY:
		k.destroy(r)
		r.out(uverbs.UVERBS_ATTR_DESTROY_CQ_RESP, make([]byte, 8))
		k.traceCmd("DESTROY_CQ", uhwIn, nil, nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_SRQ && hdr.Method_id == uverbs.UVERBS_METHOD_SRQ_CREATE:
		return k.createSRQ(r, uhwIn)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_SRQ && hdr.Method_id == uverbs.UVERBS_METHOD_SRQ_DESTROY:
		k.destroy(r)
		r.out(uverbs.UVERBS_ATTR_DESTROY_SRQ_RESP, make([]byte, 4))
		k.traceCmd("DESTROY_SRQ", uhwIn, nil, nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_MR && hdr.Method_id == uverbs.UVERBS_METHOD_MR_DESTROY:
		k.traceCmd("DEREG_MR", uhwIn, nil, nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_DEVICE && hdr.Method_id == uverbs.UVERBS_METHOD_QUERY_GID_ENTRY:
		return k.queryGID(r)
	case hdr.Object_id == uverbs.UVERBS_OBJECT_AH && hdr.Method_id == uverbs.UVERBS_METHOD_AH_DESTROY:
		k.traceCmd("DESTROY_AH", uhwIn, nil, nil, "")
		return 0
	case hdr.Object_id == uverbs.UVERBS_OBJECT_PD && hdr.Method_id == uverbs.UVERBS_METHOD_PD_DESTROY:
		k.traceCmd("DEALLOC_PD", uhwIn, nil, nil, "")
		return 0
	}
	return unix.EOPNOTSUPP
}

// destroy drops the regions of the object named by the request's first
// attribute (the handle of every DESTROY method).
func (k *fakeKernel) destroy(r attrs) {
	if len(r.a) == 0 {
		return
	}
	h := uint32(r.a[0].Data)
	name, ok := k.objName[h]
	if !ok {
		return
	}
	delete(k.objName, h)
	k.dropRegions(name)
	n, _ := strconv.Atoi(strings.TrimLeft(name, "cqpsr"))
	if name[0] == 'c' && n < len(k.cqs) {
		k.cqs[n].live = false
	}
	if name[0] == 'q' && n < len(k.qps) {
		k.qps[n].live = false
	}
}

// queryGIDTable answers QUERY_GID_TABLE with port 1's non-zero GIDs:
// what libibverbs reads from sysfs' gids files (c/fake.c writes them)
// when the kernel takes no ioctl. Their type is what it derives from the
// link layer when sysfs has no gid_attrs: IB, or RoCE v1 on Ethernet.
func (k *fakeKernel) queryGIDTable(r attrs) unix.Errno {
	size := r.in(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE)
	if len(size) != 8 || binary.NativeEndian.Uint64(size) != uint64(unsafe.Sizeof(uverbs.GidEntry{})) {
		return unix.EINVAL
	}
	typ := uint32(uverbs.IB_UVERBS_GID_TYPE_IB)
	if k.dev.LinkLayer == 2 {
		typ = uverbs.IB_UVERBS_GID_TYPE_ROCE_V1
	}
	var out []byte
	n := uint64(0)
	for i, g := range k.dev.GIDs {
		if g == ([16]byte{}) || uint32(i) >= k.dev.GIDTblLen {
			continue
		}
		e := uverbs.GidEntry{Gid_index: uint32(i), Port_num: 1, Gid_type: typ}
		copy(bytesOf(&e.Gid), g[:])
		out = append(out, bytesOf(&e)...)
		n++
	}
	if len(out) > r.outLen(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES) {
		return unix.EINVAL
	}
	r.out(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, out)
	var num [8]byte
	binary.NativeEndian.PutUint64(num[:], n)
	r.out(uverbs.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, num[:])
	return 0
}

func (k *fakeKernel) invokeWrite(cmd uint32, r attrs, uhwIn []byte) unix.Errno {
	core := r.in(uverbs.UVERBS_ATTR_CORE_IN)
	le := binary.NativeEndian
	switch cmd {
	case uverbs.IB_USER_VERBS_CMD_FLAG_EXTENDED | uverbs.IB_USER_VERBS_EX_CMD_QUERY_DEVICE:
		var resp uverbs.ExQueryDeviceResp
		b := &resp.Base
		d := k.dev
		b.Fw_ver = d.FWVer
		binary.BigEndian.PutUint64(bytesOf(&b.Node_guid), d.NodeGUID)
		binary.BigEndian.PutUint64(bytesOf(&b.Sys_image_guid), d.SysImageGUID)
		b.Max_mr_size, b.Page_size_cap = ^uint64(0), 0xfffffffffffff000
		b.Vendor_id, b.Vendor_part_id, b.Hw_ver = d.VendorID, d.VendorPartID, d.HWVer
		b.Max_qp, b.Max_qp_wr, b.Device_cap_flags = d.MaxQP, d.MaxQPWR, d.DeviceCapFlags
		b.Max_sge, b.Max_sge_rd, b.Max_cq, b.Max_cqe = d.MaxSGE, d.MaxSGERD, d.MaxCQ, d.MaxCQE
		b.Max_mr, b.Max_pd, b.Max_qp_rd_atom, b.Max_qp_init_rd_atom = d.MaxMR, d.MaxPD, d.MaxQPRDAtom, d.MaxQPInitRDAtom
		b.Max_res_rd_atom = d.MaxQPRDAtom * d.MaxQP
		b.Atomic_cap, b.Max_srq, b.Max_srq_wr, b.Max_srq_sge = d.AtomicCap, d.MaxSRQ, d.MaxSRQWR, d.MaxSRQSGE
		b.Max_pkeys, b.Local_ca_ack_delay, b.Phys_port_cnt = uint16(d.MaxPkeys), uint8(d.LocalCAAckDelay), 1
		b.Max_mr_size, b.Page_size_cap = d.MaxMRSize, d.PageSizeCap
		b.Max_mw, b.Max_mcast_grp, b.Max_mcast_qp_attach = d.MaxMW, d.MaxMcastGrp, d.MaxMcastQPAttach
		b.Max_total_mcast_qp_attach, b.Max_ah = d.MaxTotalMcastQPAttach, d.MaxAH
		o := &resp.Odp_caps
		o.General_caps = d.ODPGeneralCaps
		o.Per_transport_caps.Rc_odp_caps, o.Per_transport_caps.Uc_odp_caps = d.RCODPCaps, d.UCODPCaps
		o.Per_transport_caps.Ud_odp_caps, resp.Xrc_odp_caps = d.UDODPCaps, d.XRCODPCaps
		resp.Timestamp_mask, resp.Hca_core_clock, resp.Device_cap_flags_ex = d.TimestampMask, d.HCACoreClock, d.DeviceCapFlagsEx
		resp.Rss_caps.Supported_qpts = d.RSSSupportedQPTs
		resp.Rss_caps.Max_rwq_indirection_tables = d.MaxRWQIndirectionTables
		resp.Rss_caps.Max_rwq_indirection_table_size = d.MaxRWQIndTableSize
		resp.Max_wq_type_rq, resp.Raw_packet_caps = d.MaxWQTypeRQ, d.RawPacketCaps
		tm := &resp.Tm_caps
		tm.Rndv_hdr_size, tm.Num_tags, tm.Flags, tm.Ops, tm.Sge = d.TMMaxRndvHdrSize, d.TMMaxNumTags, d.TMFlags, d.TMMaxOps, d.TMMaxSGE
		resp.Cq_moderation_caps.Cq_moderation_count = uint16(d.MaxCQModerationCount)
		resp.Cq_moderation_caps.Cq_moderation_period = uint16(d.MaxCQModerationPeriod)
		resp.Max_dm_size = d.MaxDMSize
		resp.Response_length = uint32(min(r.outLen(uverbs.UVERBS_ATTR_CORE_OUT), int(unsafe.Sizeof(resp))))
		// struct mlx5_ib_query_device_resp
		var drv [104]byte
		le.PutUint32(drv[4:], 104)
		le.PutUint32(drv[8:], d.MaxTSO)
		le.PutUint32(drv[12:], d.TSOSupportedQPTs)
		le.PutUint64(drv[16:], d.RxHashFieldsMask)
		drv[24] = byte(d.RxHashFunction)
		le.PutUint32(drv[32:], d.CQECompMaxNum)
		le.PutUint32(drv[36:], d.CQECompFormats)
		le.PutUint32(drv[40:], d.QPRateLimitMin)
		le.PutUint32(drv[44:], d.QPRateLimitMax)
		le.PutUint32(drv[48:], d.PPSupportedQPTs)
		r.out(uverbs.UVERBS_ATTR_CORE_OUT, bytesOf(&resp))
		r.out(uverbs.UVERBS_ATTR_UHW_OUT, drv[:])
		k.traceCmd("QUERY_DEVICE_EX", uhwIn, drv[:], nil, "")
		return 0
	case uverbs.IB_USER_VERBS_CMD_ALLOC_PD:
		var resp [4]byte
		le.PutUint32(resp[:], k.newHandle(""))
		var drv [4]byte
		le.PutUint32(drv[:], k.dev.PDNBase+k.npd)
		k.npd++
		r.out(uverbs.UVERBS_ATTR_CORE_OUT, resp[:])
		r.out(uverbs.UVERBS_ATTR_UHW_OUT, drv[:])
		k.traceCmd("ALLOC_PD", uhwIn, drv[:], nil, "")
		return 0
	case uverbs.IB_USER_VERBS_CMD_REG_MR:
		if len(core) < 40 {
			return unix.EINVAL
		}
		key := k.dev.MkeyBase + 0x100*k.nmr
		k.nmr++
		var resp [12]byte
		le.PutUint32(resp[0:], k.newHandle(""))
		le.PutUint32(resp[4:], key)
		le.PutUint32(resp[8:], key)
		r.out(uverbs.UVERBS_ATTR_CORE_OUT, resp[:])
		start, length := le.Uint64(core[8:]), le.Uint64(core[16:])
		extra := fmt.Sprintf("start=%s len=%d access=0x%x", k.sym(start), length, le.Uint32(core[36:]))
		k.addRegion(fmt.Sprintf("mr%d", k.nmr-1), unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&start))), length), false)
		k.traceCmd("REG_MR", uhwIn, nil, nil, extra)
		return 0
	case uverbs.IB_USER_VERBS_CMD_MODIFY_QP:
		if len(core) < 112 {
			return unix.EINVAL
		}
		m := (*uverbs.ModifyQp)(unsafe.Pointer(&core[0]))
		extra := fmt.Sprintf("mask=0x%x state=%d", m.Attr_mask, m.Qp_state)
		k.traceCmd("MODIFY_QP", uhwIn, nil, nil, extra)
		return 0
	case uverbs.IB_USER_VERBS_CMD_RESIZE_CQ:
		return k.resizeCQ(r, core, uhwIn)
	case uverbs.IB_USER_VERBS_CMD_CREATE_AH:
		return k.createAH(r, core, uhwIn)
	case uverbs.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL:
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err.(unix.Errno)
		}
		k.chans[p[0]] = p[1]
		var resp [4]byte
		le.PutUint32(resp[:], uint32(p[0]))
		r.out(uverbs.UVERBS_ATTR_CORE_OUT, resp[:])
		k.traceCmd("CREATE_COMP_CHANNEL", uhwIn, nil, nil, "")
		return 0
	}
	return unix.EOPNOTSUPP
}

func (k *fakeKernel) createCQ(r attrs, uhwIn []byte) unix.Errno {
	le := binary.NativeEndian
	cqe := le.Uint32(r.in(uverbs.UVERBS_ATTR_CREATE_CQ_CQE))
	if len(uhwIn) < 32 {
		return unix.EINVAL
	}
	size := le.Uint32(uhwIn[16:])
	nent := uint32(1)
	for nent < cqe+1 && nent != 0 {
		nent <<= 1
	}
	if (size != 64 && size != 128) || nent == 0 || cqe > k.dev.MaxCQE {
		return unix.EINVAL
	}
	n := len(k.cqs)
	c := &fakeCQ{live: true, cqn: k.dev.CQNBase + uint32(n), nent: nent, cqeSize: size, chanW: -1}
	if uh := r.in(uverbs.UVERBS_ATTR_CREATE_CQ_USER_HANDLE); len(uh) == 8 {
		c.userH = le.Uint64(uh)
	}
	if a := r.find(uverbs.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL); a != nil {
		if w, ok := k.chans[int(int32(a.Data))]; ok {
			c.chanW = w
		}
	}
	c.buf = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[0]))), int(nent*size))
	db := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[8]))), 8)
	k.cqs = append(k.cqs, c)
	name := fmt.Sprintf("cq%d", n)
	k.addRegion(name+".buf", c.buf, false)
	k.addRegion(name+".db", db, false)
	c.handle = k.newHandle(name)
	r.setData(uverbs.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(c.handle))
	var rc [4]byte
	le.PutUint32(rc[:], nent-1)
	r.out(uverbs.UVERBS_ATTR_CREATE_CQ_RESP_CQE, rc[:])
	var drv [8]byte
	le.PutUint32(drv[:], c.cqn)
	r.out(uverbs.UVERBS_ATTR_UHW_OUT, drv[:])
	k.traceCmd("CREATE_CQ", uhwIn, drv[:], []int{0, 8}, fmt.Sprintf("cq=%d cqe=%d", n, nent-1))
	return 0
}

// resizeCQ is c/fake.c's RESIZE_CQ: the device ends the old ring with a
// RESIZE_CQ CQE and goes on in the new one.
func (k *fakeKernel) resizeCQ(r attrs, core, uhwIn []byte) unix.Errno {
	le := binary.NativeEndian
	if len(core) < 16 || len(uhwIn) < 16 {
		return unix.EINVAL
	}
	h, cqe := le.Uint32(core[8:]), le.Uint32(core[12:])
	name, ok := k.objName[h]
	if !ok || name[0] != 'c' {
		return unix.EINVAL
	}
	n, _ := strconv.Atoi(name[2:])
	c := k.cqs[n]
	nent := uint32(1)
	for nent < cqe+1 && nent != 0 {
		nent <<= 1
	}
	if !c.live || nent == 0 || cqe > k.dev.MaxCQE || uint32(le.Uint16(uhwIn[8:])) != c.cqeSize {
		return unix.EINVAL
	}
	off := int(c.pi&(c.nent-1))*int(c.cqeSize) + int(c.cqeSize) - 64
	clear(c.buf[off : off+63])
	c.buf[off+63] = 5<<4 | byte((c.pi/c.nent)&1)
	c.pi++
	k.dropRegions(name)
	c.buf = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[0]))), int(nent*c.cqeSize))
	c.nent = nent
	k.addRegion(name+".buf", c.buf, false)
	for i := len(k.regions) - 2; i >= 0; i-- {
		if k.regions[i].name == name+".db" {
			k.regions[i].live = true
			break
		}
	}
	var resp [8]byte
	le.PutUint32(resp[:], nent-1)
	r.out(uverbs.UVERBS_ATTR_CORE_OUT, resp[:])
	k.traceCmd("RESIZE_CQ", uhwIn, nil, []int{0}, fmt.Sprintf("cq=%d cqe=%d", n, nent-1))
	return 0
}

// createSRQ is c/fake.c's CREATE_SRQ.
func (k *fakeKernel) createSRQ(r attrs, uhwIn []byte) unix.Errno {
	le := binary.NativeEndian
	if len(uhwIn) < 32 {
		return unix.EINVAL
	}
	maxWR := le.Uint32(r.in(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_WR))
	maxSGE := le.Uint32(r.in(uverbs.UVERBS_ATTR_CREATE_SRQ_MAX_SGE))
	desc := max(32, 16+maxSGE*16)
	d := uint32(1)
	for d < desc {
		d <<= 1
	}
	nwqe := uint32(1)
	for nwqe < maxWR+1 && nwqe != 0 {
		nwqe <<= 1
	}
	if nwqe == 0 || maxWR > k.dev.MaxSRQWR || maxSGE > k.dev.MaxSRQSGE {
		return unix.EINVAL
	}
	n := k.nsrq
	k.nsrq++
	name := fmt.Sprintf("srq%d", n)
	k.addRegion(name+".buf", unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[0]))), int(nwqe*d)), false)
	k.addRegion(name+".db", unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[8]))), 8), false)
	h := k.newHandle(name)
	r.setData(uverbs.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(h))
	var v [4]byte
	le.PutUint32(v[:], nwqe-1)
	r.out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, v[:])
	le.PutUint32(v[:], maxSGE)
	r.out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, v[:])
	le.PutUint32(v[:], k.dev.SRQNBase+n)
	r.out(uverbs.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, v[:])
	var drv [8]byte
	le.PutUint32(drv[:], k.dev.SRQNBase+n)
	r.out(uverbs.UVERBS_ATTR_UHW_OUT, drv[:])
	k.traceCmd("CREATE_SRQ", uhwIn, drv[:], []int{0, 8}, fmt.Sprintf("srq=%d max_wr=%d max_sge=%d", n, maxWR, maxSGE))
	return 0
}

func (k *fakeKernel) createQP(r attrs, uhwIn []byte) unix.Errno {
	le := binary.NativeEndian
	if len(uhwIn) < 48 {
		return unix.EINVAL
	}
	capIn := r.in(uverbs.UVERBS_ATTR_CREATE_QP_CAP)
	if len(capIn) < 20 {
		return unix.EINVAL
	}
	typ := r.in(uverbs.UVERBS_ATTR_CREATE_QP_TYPE)
	n := len(k.qps)
	q := &fakeQP{live: true, qpn: k.dev.QPNBase + uint32(n), uidx: le.Uint32(uhwIn[32:])}
	sqCnt, rqCnt, rqShift := le.Uint32(uhwIn[16:]), le.Uint32(uhwIn[20:]), le.Uint32(uhwIn[24:])
	size := int(rqCnt<<rqShift + sqCnt*64)
	name := fmt.Sprintf("qp%d", n)
	if size > 0 {
		k.addRegion(name+".buf", unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[0]))), size), false)
	}
	k.addRegion(name+".db", unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&uhwIn[8]))), 8), false)
	k.qps = append(k.qps, q)
	q.handle = k.newHandle(name)
	r.setData(uverbs.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(q.handle))
	r.out(uverbs.UVERBS_ATTR_CREATE_QP_RESP_CAP, capIn[:20])
	var qpn [4]byte
	le.PutUint32(qpn[:], q.qpn)
	r.out(uverbs.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, qpn[:])
	var drv [40]byte
	le.PutUint32(drv[:], k.dev.FirstBfreg+uint32(n))
	r.out(uverbs.UVERBS_ATTR_UHW_OUT, drv[:])
	c := func(i int) uint32 { return le.Uint32(capIn[4*i:]) }
	extra := fmt.Sprintf("qp=%d type=%d cap=%d,%d,%d,%d,%d", n, typ[0], c(0), c(1), c(2), c(3), c(4))
	k.traceCmd("CREATE_QP", uhwIn, drv[:], []int{0, 8, 40}, extra)
	return 0
}

// rocePort is c/device.c's fake_roce_port: QUERY_PORT's answer for port 1
// as a RoCE port.
func (k *fakeKernel) rocePort(l *uverbs.QueryPortResp) {
	l.Link_layer, l.Lid, l.Port_cap_flags = 2, 0, k.dev.RoCEPortCapFlags
}

// roceGID is c/device.c's fake_roce_gid: GID index of the RoCE port and
// 1 for a RoCE v2 GID, 0 for v1, -1 for an empty entry.
func (k *fakeKernel) roceGID(index uint32) (gid [16]byte, v2 int) {
	s := [...]string{k.dev.RoCEGID0, k.dev.RoCEGID1, k.dev.RoCEGID2, k.dev.RoCEGID3}
	if index >= uint32(len(s)) {
		return gid, -1
	}
	a, err := netip.ParseAddr(s[index])
	if err != nil || !a.Is6() || a.IsUnspecified() {
		return gid, -1
	}
	return a.As16(), int(k.dev.RoCEGIDV2>>index) & 1
}

// roceDMAC is c/device.c's fake_roce_dmac: the MAC a kernel resolves for
// the destination GID g (see device.txt).
func (k *fakeKernel) roceDMAC(g []byte) (mac [6]byte) {
	v4mapped := [12]byte{10: 0xff, 11: 0xff}
	switch {
	case g[0] == 0xfe && g[1]&0xc0 == 0x80:
		mac = [6]byte{g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]}
	case g[0] == 0xff:
		mac = [6]byte{0x33, 0x33, g[12], g[13], g[14], g[15]}
	case [12]byte(g[:12]) == v4mapped && g[12]&0xf0 == 0xe0:
		mac = [6]byte{0x01, 0x00, 0x5e, g[13] & 0x7f, g[14], g[15]}
	default:
		for i := range 5 {
			mac[i] = byte(k.dev.RoCENeighMAC >> (40 - 8*i))
		}
		mac[5] = g[15]
	}
	return mac
}

// queryGID answers QUERY_GID_ENTRY (c/fake.c traces libibverbs' read of
// the GID type from sysfs as this command). An empty entry is ENODATA.
func (k *fakeKernel) queryGID(r attrs) unix.Errno {
	num := func(b []byte) uint32 {
		var v [8]byte
		copy(v[:], b)
		return uint32(binary.NativeEndian.Uint64(v[:]))
	}
	port := num(r.in(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_PORT))
	index := num(r.in(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX))
	k.printf("cmd QUERY_GID_ENTRY port=%d index=%d in= out=\n", port, index)
	gid, v2 := k.roceGID(index)
	if !k.roce || port != 1 || v2 < 0 {
		return unix.ENODATA
	}
	e := uverbs.GidEntry{Gid_index: index, Port_num: port, Gid_type: uverbs.IB_UVERBS_GID_TYPE_ROCE_V1}
	if v2 == 1 {
		e.Gid_type = uverbs.IB_UVERBS_GID_TYPE_ROCE_V2
	}
	copy(bytesOf(&e.Gid), gid[:])
	r.out(uverbs.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, bytesOf(&e))
	return 0
}

// createAH is c/fake.c's create_ah: mlx5_ib_create_ah's answer. core is
// struct ib_uverbs_create_ah, its attributes at offset 24.
func (k *fakeKernel) createAH(r attrs, core, uhwIn []byte) unix.Errno {
	if len(core) < 56 {
		return unix.EINVAL
	}
	attr := core[24:56]
	var resp [16]byte // struct mlx5_ib_create_ah_resp
	n := 0
	if k.roce {
		if attr[29] == 0 { // is_global
			return unix.EINVAL
		}
		if _, v2 := k.roceGID(uint32(attr[20])); v2 < 0 {
			return unix.ENODATA
		}
		if r.outLen(uverbs.UVERBS_ATTR_UHW_OUT) < 10 {
			return unix.EINVAL
		}
		n = 10 // offsetofend(struct mlx5_ib_create_ah_resp, dmac)
		binary.NativeEndian.PutUint32(resp[0:], uint32(n))
		mac := k.roceDMAC(attr[:16])
		copy(resp[4:], mac[:])
	}
	var h [4]byte
	binary.NativeEndian.PutUint32(h[:], k.newHandle(""))
	r.out(uverbs.UVERBS_ATTR_CORE_OUT, h[:])
	r.out(uverbs.UVERBS_ATTR_UHW_OUT, resp[:n])
	k.traceCmd("CREATE_AH", uhwIn, resp[:], nil, fmt.Sprintf("attr=%x", attr))
	return 0
}

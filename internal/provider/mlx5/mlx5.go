// Package mlx5 is goverbs' provider for NVIDIA ConnectX devices (the mlx5
// kernel driver), written from rdma-core 44's providers/mlx5 and following
// its legacy path (no DevX): user space allocates the queues and the
// doorbell records and hands their addresses to the kernel in the create
// commands; posting writes work queue elements, a doorbell record and a
// store to a UAR page (a BlueFlame register); polling reads CQEs by their
// owner bit. No system call on the data path.
//
// What it carries so far: the context (GET_CONTEXT with
// mlx5_ib_alloc_ucontext_req_v2, the UAR pages and BlueFlame registers),
// PDs, MRs, CQs with 64-byte CQEs (poll, error CQEs, arm, resize, the
// removal of a destroyed or reset QP's completions), RC, UC and UD QPs
// (SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA WRITE (with immediate), RDMA
// READ, atomics, inline data, fences, solicited events), their receive
// queues, SRQs, and address handles: built in user space on InfiniBand
// ports, made by CREATE_AH on RoCE ports (the kernel answers the
// destination MAC). Not yet: 128-byte CQEs.
//
// Its sizes, driver data and queue bytes are those of libmlx5: the
// differential tests in ./difftest run scenarios through libibverbs +
// libmlx5 and through goverbs against the same fake kernel and compare
// every byte (make test-mlx5). That is a claim about libmlx5, not about
// hardware: nothing here has run on a ConnectX.
package mlx5

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
)

// Provider is mlx5's entry in the registry.
var Provider = provider.Provider{Driver: uverbs.RDMA_DRIVER_MLX5, Open: open}

var (
	errQueueSize = errors.New("mlx5: unsupported queue size")
	errDevice    = errors.New("mlx5: the kernel's answer cannot be used")
	// ErrNotYet is returned for what the provider does not carry yet (a
	// kernel that sets up no static BlueFlame registers, RoCE address handles on a
	// kernel that does not answer CREATE_AH with the MAC).
	ErrNotYet = errors.New("mlx5: not supported by goverbs' mlx5 provider yet")
)

var pageSize = uintptr(unix.Getpagesize())

// ucontext is mlx5's provider.Context.
type ucontext struct {
	fd   *uverbs.FD
	req  allocUcontextReq
	resp allocUcontextResp

	totUUARs, lowLatUUARs uint32
	uars                  [][]byte // the UAR pages, mapped by Start
	bfs                   []bf
	cqUAR                 unsafe.Pointer // where CQ arm doorbells go (UAR page 0)

	// From EX_QUERY_DEVICE and QUERY_PORT (port 1).
	atomics   bool
	devResp   queryDeviceResp
	linkLayer uint8
	portFlags uint8

	dbrecs dbrecPages
	uidxs  uidxAlloc
	byUIdx rscTable // CQE version 1
	byQPN  rscTable // CQE version 0
	srqs   srqTable // by SRQ number, CQE version 0
}

func open(fd *uverbs.FD) provider.Context {
	c := &ucontext{fd: fd}
	// get_total_uuars and get_num_low_lat_uuars with no environment: 16
	// registers (at least two per 4 KiB of a page), 4 of them low latency.
	c.totUUARs = max(defTotUUARs, uint32(pageSize/adapterPageSize*numNonFPBfregsPerUAR))
	c.totUUARs = (c.totUUARs + numNonFPBfregsPerUAR - 1) &^ (numNonFPBfregsPerUAR - 1)
	c.lowLatUUARs = max(defLowLatUUARs, c.totUUARs-medBfregsThreshold)
	c.req = allocUcontextReq{
		TotalNumBfregs:      c.totUUARs,
		NumLowLatencyBfregs: c.lowLatUUARs,
		MaxCQEVersion:       1,
		// Not MLX5_LIB_CAP_DYN_UAR, which libmlx5 44 offers: a kernel
		// that gets it allocates no static registers (tot_bfregs 0 in
		// the answer) and expects UARs to be asked for one by one through
		// the UAR object's ioctl methods. Without it the kernel sets up
		// the static BlueFlame registers this provider maps, as it does
		// for libmlx5 releases from before dynamic UARs.
		LibCaps: libCap4KUAR,
	}
	return c
}

// GetContext sends struct mlx5_ib_alloc_ucontext_req_v2 without the DevX
// flag (libmlx5 asks for DevX first and again without it when refused;
// goverbs never uses DevX).
func (c *ucontext) GetContext() provider.Udata {
	return provider.Udata{In: provider.Bytes(&c.req), Out: provider.Bytes(&c.resp)}
}

// Start maps the UAR pages and sets up the BlueFlame registers
// (mlx5_set_context), then asks the device's attributes and port 1, as
// libmlx5 does at open.
func (c *ucontext) Start() error {
	r := &c.resp
	if r.TotBfregs == 0 {
		return fmt.Errorf("%w: the kernel set up no static BlueFlame registers (tot_bfregs 0)", ErrNotYet)
	}
	if r.NumUARsPerPage == 0 || r.BfRegSize == 0 || r.BfRegSize > adapterPageSize/8 || r.CacheLineSize == 0 ||
		r.CacheLineSize > uint32(pageSize) || r.CacheLineSize&(r.CacheLineSize-1) != 0 {
		return fmt.Errorf("%w: %+v", errDevice, *r)
	}
	if r.CQEVersion > 1 {
		return fmt.Errorf("%w: CQE version %d", errDevice, r.CQEVersion)
	}
	if uintptr(r.NumUARsPerPage)*adapterPageSize > pageSize {
		return fmt.Errorf("%w: %d UARs in a page of %d bytes", errDevice, r.NumUARsPerPage, pageSize)
	}
	c.totUUARs = r.TotBfregs
	perPage := r.NumUARsPerPage * numNonFPBfregsPerUAR
	pages := c.totUUARs / perPage
	if pages == 0 || pages > maxUARs {
		return fmt.Errorf("%w: %d bfregs, %d UARs a page", errDevice, r.TotBfregs, r.NumUARsPerPage)
	}
	for i := uint32(0); i < pages; i++ {
		// get_uar_mmap_offset: command MLX5_IB_MMAP_REGULAR_PAGE (0)
		// in bits 8 and up of the page offset, the index below.
		off := uint64(i&0xff|(i>>8)<<16) * uint64(pageSize)
		m, err := uverbs.Mmap(c.fd, off, int(pageSize))
		if err != nil {
			c.unmapUARs()
			return fmt.Errorf("mlx5: map UAR page %d: %w", i, err)
		}
		c.uars = append(c.uars, m)
	}
	gross := c.totUUARs / numNonFPBfregsPerUAR * numBfregsPerUAR
	c.bfs = make([]bf, gross)
	for i := uint32(0); i < pages; i++ {
		for j := uint32(0); j < r.NumUARsPerPage; j++ {
			for k := uint32(0); k < numBfregsPerUAR; k++ {
				n := (i*r.NumUARsPerPage+j)*numBfregsPerUAR + k
				b := &c.bfs[n]
				b.reg = unsafe.Add(unsafe.Pointer(&c.uars[i][0]), uintptr(adapterPageSize*j+bfOffset+k*r.BfRegSize))
				b.needLock = c.needLock(n)
				if n != 0 {
					b.bufSize = r.BfRegSize / 2
				}
				b.uuarn = n
			}
		}
	}
	c.cqUAR = unsafe.Pointer(&c.uars[0][0])
	if err := c.query(); err != nil {
		c.unmapUARs()
		return err
	}
	return nil
}

// needLock is need_uuar_lock: register 0 takes no BlueFlame copy and no
// lock; the low-latency registers belong to one QP each.
func (c *ucontext) needLock(n uint32) bool {
	if n == 0 {
		return false
	}
	i := n/2 + n%2
	return i < c.totUUARs-c.lowLatUUARs
}

// query issues EX_QUERY_DEVICE with room for mlx5's driver response and
// QUERY_PORT of port 1, as libmlx5's mlx5_set_context does.
func (c *ucontext) query() error {
	req := uverbs.ExQueryDevice{}
	var resp uverbs.ExQueryDeviceResp
	var r uverbs.Ioctl
	r.InitInvokeWrite("EX_QUERY_DEVICE", uverbs.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbs.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, uverbs.RDMA_DRIVER_MLX5)
	r.In(uverbs.UVERBS_ATTR_CORE_IN, unsafe.Pointer(&req), unsafe.Sizeof(req))
	r.Out(uverbs.UVERBS_ATTR_CORE_OUT, unsafe.Pointer(&resp), unsafe.Sizeof(resp))
	if c.resp.CmdsSuppUHW&cmdsSuppUHWQueryDevice != 0 {
		r.Out(uverbs.UVERBS_ATTR_UHW_OUT, unsafe.Pointer(&c.devResp), unsafe.Sizeof(c.devResp))
	}
	if err := r.Do(c.fd); err != nil {
		return fmt.Errorf("mlx5: query device: %w", err)
	}
	c.atomics = resp.Base.Atomic_cap != 0
	var port uverbs.QueryPortRespEx
	r.Init("DEVICE.QUERY_PORT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_QUERY_PORT, uverbs.RDMA_DRIVER_MLX5)
	r.Const(uverbs.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
	r.Out(uverbs.UVERBS_ATTR_QUERY_PORT_RESP, unsafe.Pointer(&port), unsafe.Sizeof(port))
	if err := r.Do(c.fd); err != nil {
		return fmt.Errorf("mlx5: query port 1: %w", err)
	}
	c.linkLayer, c.portFlags = port.Legacy_resp.Link_layer, port.Legacy_resp.Flags
	return nil
}

func (c *ucontext) unmapUARs() {
	for _, m := range c.uars {
		uverbs.Munmap(m)
	}
	c.uars, c.bfs, c.cqUAR = nil, nil, nil
}

// Close unmaps the UAR pages and frees the doorbell record pages.
func (c *ucontext) Close() error {
	var errs []error
	for _, m := range c.uars {
		errs = append(errs, uverbs.Munmap(m))
	}
	c.uars, c.bfs, c.cqUAR = nil, nil, nil
	errs = append(errs, c.dbrecs.free())
	return errors.Join(errs...)
}

// cmdsSuppUHWQueryDevice is MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE: the
// kernel takes driver data on EX_QUERY_DEVICE.
const cmdsSuppUHWQueryDevice = 1 << 0

// QueryDevice gives EX_QUERY_DEVICE room for struct
// mlx5_ib_query_device_resp when the kernel takes it, and reads the TSO,
// RSS hash and packet pacing caps from it, as mlx5_query_device_ex does.
func (c *ucontext) QueryDevice() (provider.Udata, func(*provider.DeviceCaps)) {
	if c.resp.CmdsSuppUHW&cmdsSuppUHWQueryDevice == 0 {
		return provider.Udata{}, nil
	}
	resp := new(queryDeviceResp)
	return provider.Udata{Out: provider.Bytes(resp)}, func(caps *provider.DeviceCaps) {
		caps.MaxTSO = resp.Tso_caps.Max_tso
		caps.TSOSupportedQPTs = resp.Tso_caps.Supported_qpts
		caps.RxHashFieldsMask = resp.Rss_caps.Hash_fields_mask
		caps.RxHashFunction = resp.Rss_caps.Hash_function
		caps.QPRateLimitMin = resp.Packet_pacing_caps.Qp_rate_limit_min
		caps.QPRateLimitMax = resp.Packet_pacing_caps.Qp_rate_limit_max
		caps.PacketPacingSupportedQPTs = resp.Packet_pacing_caps.Supported_qpts
	}
}

// FWVersion prints major.minor.sub with four digits of sub, as libmlx5's
// mlx5_query_device_ex does.
func (*ucontext) FWVersion(raw uint64) string {
	return fmt.Sprintf("%d.%d.%04d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}

// RegMR has no driver data.
func (*ucontext) RegMR() provider.Udata { return provider.Udata{} }

// AllocPD gives room for struct mlx5_ib_alloc_pd_resp (the PD number).
func (*ucontext) AllocPD() provider.Udata {
	return provider.Udata{Out: provider.Bytes(new(allocPDResp))}
}

// bf is a BlueFlame register (struct mlx5_bf): two halves of bufSize
// bytes used in turn (offset flips after each doorbell), written under
// lock when QPs share it.
type bf struct {
	reg      unsafe.Pointer
	offset   uint32
	bufSize  uint32
	uuarn    uint32
	needLock bool
	lock     provider.Lock
}

// dbrecPages hands out doorbell records: slots of a cache line in pages
// off the Go heap, the lowest free slot of the first page with room first
// (mlx5_alloc_dbrec).
type dbrecPages struct {
	mu    sync.Mutex
	pages []*dbrecPage
}

type dbrecPage struct {
	mem  []byte
	used []bool
	n    int
}

// alloc returns a zeroed record of line bytes.
func (d *dbrecPages) alloc(line uint32) (unsafe.Pointer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// libmlx5 keeps pages with room on a list, newest first.
	for i := len(d.pages) - 1; i >= 0; i-- {
		p := d.pages[i]
		if p.n == len(p.used) {
			continue
		}
		return p.take(line), nil
	}
	mem, err := allocBuf(pageSize)
	if err != nil {
		return nil, err
	}
	p := &dbrecPage{mem: mem, used: make([]bool, pageSize/uintptr(line))}
	d.pages = append(d.pages, p)
	return p.take(line), nil
}

func (p *dbrecPage) take(line uint32) unsafe.Pointer {
	for i, u := range p.used {
		if !u {
			p.used[i] = true
			p.n++
			rec := unsafe.Pointer(&p.mem[uintptr(i)*uintptr(line)])
			clear(unsafe.Slice((*byte)(rec), 8))
			return rec
		}
	}
	panic("mlx5: doorbell page full") // alloc checked n
}

// release gives a record back. Pages stay mapped until the context
// closes.
func (d *dbrecPages) release(rec unsafe.Pointer, line uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pages {
		base := uintptr(unsafe.Pointer(&p.mem[0]))
		if a := uintptr(rec); a >= base && a < base+uintptr(len(p.mem)) {
			i := (a - base) / uintptr(line)
			if p.used[i] {
				p.used[i] = false
				p.n--
			}
			return
		}
	}
}

func (d *dbrecPages) free() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.pages {
		errs = append(errs, freeBuf(p.mem))
	}
	d.pages = nil
	return errors.Join(errs...)
}

// rscTable maps a 24-bit number (a QP's user index, what a CQE of CQE
// version 1 carries; or its QP number with version 0) to the QP, in two
// levels as libmlx5's tables, each entry an atomic pointer: Poll reads it
// while QPs are created and destroyed.
type rscTable struct {
	top [1 << 12]atomic.Pointer[[1 << 12]atomic.Pointer[qp]]
}

func (t *rscTable) set(i uint32, q *qp) {
	i &= 0xffffff
	sub := t.top[i>>12].Load()
	if sub == nil {
		if q == nil {
			return
		}
		sub = new([1 << 12]atomic.Pointer[qp])
		if !t.top[i>>12].CompareAndSwap(nil, sub) {
			sub = t.top[i>>12].Load()
		}
	}
	sub[i&0xfff].Store(q)
}

func (t *rscTable) get(i uint32) *qp {
	i &= 0xffffff
	if sub := t.top[i>>12].Load(); sub != nil {
		return sub[i&0xfff].Load()
	}
	return nil
}

// uidxAlloc hands out user indices, the lowest free first
// (get_free_uidx).
type uidxAlloc struct {
	mu   sync.Mutex
	used map[uint32]bool
}

func (a *uidxAlloc) alloc() (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used == nil {
		a.used = map[uint32]bool{}
	}
	for i := uint32(0); i < 1<<24; i++ {
		if !a.used[i] {
			a.used[i] = true
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: no free user index", errQueueSize)
}

func (a *uidxAlloc) free(i uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, i)
}

// allocBuf returns size bytes (rounded up to pages) off the Go heap,
// zeroed, not inherited by a fork (the kernel pins them for the device).
func allocBuf(size uintptr) ([]byte, error) {
	if size == 0 || size > 1<<31 {
		return nil, fmt.Errorf("%w: %d bytes", errQueueSize, size)
	}
	b, err := unix.Mmap(-1, 0, int(align(size, pageSize)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mlx5: allocate %d bytes: %w", size, err)
	}
	if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(b)
		return nil, fmt.Errorf("mlx5: madvise DONTFORK: %w", err)
	}
	return b, nil
}

func freeBuf(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

func align(n, a uintptr) uintptr { return (n + a - 1) &^ (a - 1) }

// pow2 rounds n up to a power of two (roundup_pow_of_two); 0 stays 0.
func pow2(n uint32) uint32 {
	if n <= 1 {
		return n
	}
	p := uint32(1)
	for p < n {
		p <<= 1
	}
	return p
}

// ilog32 is the number of significant bits of n (ilog32(0) = 0).
func ilog32(n uint32) uint32 {
	var b uint32
	for n != 0 {
		b++
		n >>= 1
	}
	return b
}

func addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }

// The big-endian fields of WQEs, CQEs and address vectors, read and
// written as single words: 4- and 8-byte fields sit at offsets aligned to
// their size. (Byte by byte, the compiler would not always merge the
// stores: a byte it can prove constant becomes a store of its own.)

func be32(p unsafe.Pointer) uint32 { return beWord32(*(*uint32)(p)) }

func be16(p unsafe.Pointer) uint16 {
	if bigEndian {
		return *(*uint16)(p)
	}
	return bits.ReverseBytes16(*(*uint16)(p))
}

func be64(p unsafe.Pointer) uint64 { return beWord64(*(*uint64)(p)) }

func putBE16(p unsafe.Pointer, v uint16) {
	b := (*[2]byte)(p)
	b[0], b[1] = byte(v>>8), byte(v)
}

func putBE32(p unsafe.Pointer, v uint32) { *(*uint32)(p) = beWord32(v) }

func putBE64(p unsafe.Pointer, v uint64) { *(*uint64)(p) = beWord64(v) }

// beWord32 is the 32-bit word whose memory holds v big-endian, for single
// stores of device words (doorbell records, the arm word); it is its own
// inverse.
func beWord32(v uint32) uint32 {
	if bigEndian {
		return v
	}
	return bits.ReverseBytes32(v)
}

// beWord64 is beWord32 for a 64-bit word.
func beWord64(v uint64) uint64 {
	if bigEndian {
		return v
	}
	return bits.ReverseBytes64(v)
}

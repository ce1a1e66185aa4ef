package verbs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/pollfd"
	"github.com/goverbs/goverbs/internal/provider/registry"
	"github.com/goverbs/goverbs/internal/uverbshook"
	"github.com/goverbs/goverbs/uverbs"
)

// Context is an open uverbs device: the kernel ucontext, its async-event fd
// and every object created on it. It is safe for concurrent use.
//
// Close destroys the objects still open, in the order the kernel requires
// (QPs, SRQs, CQs, channels, AHs and MWs, MRs, PDs), then closes the fds.
// The kernel frees the ucontext only when the last reference to the device
// file is gone, and every mapped ring holds one: objects unmap their rings in
// their own Close, so after Context.Close nothing of the context remains.
type Context struct {
	dev            Device
	k              kobj.Context // uverbs fd, driver id, object table
	async          *pollfd.FD
	numCompVectors int
	coreSupport    uint64

	capsOnce sync.Once // CapFlags
	caps     uint64
	capsErr  error
}

// Open opens the RDMA device called name ("rxe0").
func Open(name string) (*Context, error) {
	dev, err := LookupDevice(name)
	if err != nil {
		return nil, err
	}
	return OpenDevice(dev)
}

// OpenDevice opens dev, as listed by Devices. It fails with a
// *ProviderError when goverbs has no provider for dev.Driver, and with
// ErrNotUverbs when dev.Path is not a uverbs character device.
func OpenDevice(dev Device) (*Context, error) {
	if dev.Path == "" {
		return nil, fmt.Errorf("verbs: device %s has no uverbs character device (is ib_uverbs loaded?): %w", dev.Name, ErrNotUverbs)
	}
	prov, ok := registry.Lookup(uint32(dev.Driver))
	if !ok {
		return nil, &ProviderError{Device: dev.Name, Driver: dev.Driver}
	}
	raw, err := openUverbs(dev)
	if err != nil {
		return nil, err
	}
	fd := uverbs.NewFD(raw)
	if prov.InterruptibleCommands {
		fd.BlockSignalsInUse()
	}
	// The provider's context is the ops table of every object created on
	// this one (package internal/provider).
	c := &Context{dev: dev, k: kobj.Context{FD: fd, Driver: uint32(dev.Driver), Provider: prov.Open(fd)}}

	var numVectors uint32
	var r uverbs.Ioctl
	r.Init("DEVICE.GET_CONTEXT", uverbs.UVERBS_OBJECT_DEVICE, uverbs.UVERBS_METHOD_GET_CONTEXT, uint32(dev.Driver))
	r.Out(uverbs.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, unsafe.Pointer(&numVectors), 4)
	// CORE_SUPPORT appeared after NUM_COMP_VECTORS; older kernels may not
	// write it.
	r.Optional(r.Out(uverbs.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, unsafe.Pointer(&c.coreSupport), 8))
	c.k.Provider.GetContext().Add(&r)
	if err := r.Do(fd); err != nil {
		fd.Close()
		if errors.Is(err, unix.ENOTTY) {
			return nil, fmt.Errorf("verbs: %s: %w: %w", dev.Path, ErrNotUverbs, err)
		}
		return nil, fmt.Errorf("verbs: device %s: %w", dev.Name, err)
	}
	c.numCompVectors = int(numVectors)
	if err := c.k.Provider.Start(); err != nil {
		fd.Close()
		return nil, fmt.Errorf("verbs: device %s: %s provider: %w", dev.Name, dev.Driver, err)
	}

	r.Init("ASYNC_EVENT.ALLOC", uverbs.UVERBS_OBJECT_ASYNC_EVENT, uverbs.UVERBS_METHOD_ASYNC_EVENT_ALLOC, uint32(dev.Driver))
	afd := r.NewFD(uverbs.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if err := r.Do(fd); err != nil {
		c.k.Provider.Close()
		fd.Close()
		return nil, fmt.Errorf("verbs: device %s: %w", dev.Name, err)
	}
	c.async, err = pollfd.New(int(int32(r.Data(afd))), "uverbs-async")
	if err != nil {
		c.k.Provider.Close()
		fd.Close()
		return nil, fmt.Errorf("verbs: device %s: async event fd: %w", dev.Name, err)
	}
	return c, nil
}

// openUverbs opens dev's uverbs character device and checks that it is
// one, or, in tests that installed a fake kernel (internal/uverbshook), has
// that kernel open it.
func openUverbs(dev Device) (int, error) {
	if k := uverbshook.Installed(); k != nil {
		raw, err := k.Open(dev.Path)
		if err != nil {
			return -1, fmt.Errorf("verbs: open %s: %w", dev.Path, err)
		}
		return raw, nil
	}
	var st unix.Stat_t
	if err := unix.Stat(dev.Path, &st); err != nil {
		return -1, fmt.Errorf("verbs: %s: %w", dev.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return -1, fmt.Errorf("verbs: %s is not a character device: %w", dev.Path, ErrNotUverbs)
	}
	raw, err := unix.Open(dev.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("verbs: open %s: %w", dev.Path, err)
	}
	if err := checkUverbs(raw, dev); err != nil {
		unix.Close(raw)
		return -1, err
	}
	return raw, nil
}

// checkUverbs makes sure raw is the uverbs character device dev describes,
// before any ioctl is sent to it.
func checkUverbs(raw int, dev Device) error {
	var st unix.Stat_t
	if err := unix.Fstat(raw, &st); err != nil {
		return fmt.Errorf("verbs: stat %s: %w", dev.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("verbs: %s: %w", dev.Path, ErrNotUverbs)
	}
	if dev.Dev != 0 && uint64(st.Rdev) != dev.Dev {
		return fmt.Errorf("verbs: %s is device %d:%d, not %s's %d:%d: %w", dev.Path,
			unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), dev.Name,
			unix.Major(dev.Dev), unix.Minor(dev.Dev), ErrNotUverbs)
	}
	// The char device's sysfs node says which class it belongs to.
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/char/%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))))
	if err == nil && !strings.Contains(link, "/infiniband_verbs/") {
		return fmt.Errorf("verbs: %s: %w", dev.Path, ErrNotUverbs)
	}
	return nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() Device { return c.dev }

// driver returns the device's driver id, which every ioctl header carries.
func (c *Context) driver() uint32 { return c.k.Driver }

// AsyncFD returns the number of the async-event file descriptor, for
// applications that multiplex it with epoll; Event reads it. The number is
// valid until Close.
func (c *Context) AsyncFD() int { return c.async.Int() }

// NumCompVectors is the number of completion vectors (comp_vector values
// valid for CQ creation).
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// CoreSupport is the kernel's IB_UVERBS_CORE_SUPPORT_* bitmap.
func (c *Context) CoreSupport() uint64 { return c.coreSupport }

// do issues an ioctl on the context's device. No check of closed: Close
// destroys the objects it still tracks through do after setting it. Once
// Close is done, the closed descriptor refuses.
func (c *Context) do(r *uverbs.Ioctl) error { return r.Do(c.k.FD) }

// track registers an object in the context's table (kobj.Context.Track).
func (c *Context) track(kind kobj.Kind, obj io.Closer) (uint64, error) { return c.k.Track(kind, obj) }

// untrack removes an object registered with track.
func (c *Context) untrack(handle uint64) { c.k.Untrack(handle) }

// isClosed reports whether Close has begun.
func (c *Context) isClosed() bool { return c.k.Closed() }

func (c *Context) checkOpen() error {
	if c.k.Closed() {
		return ErrClosed
	}
	return nil
}

// Close destroys every object still open on the context in dependency
// order and closes its file descriptors. Closing twice is not an error.
func (c *Context) Close() error {
	objs, ok := c.k.Close()
	if !ok {
		return nil
	}
	var errs []error
	for _, o := range objs {
		if err := o.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	// The provider unmaps what its context mapped (a doorbell page) once
	// no object needs it, before the descriptor closes.
	errs = append(errs, c.k.Provider.Close(), c.async.Close(), c.k.FD.Close())
	return errors.Join(errs...)
}

package verbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/internal/uverbshook"
	"github.com/goverbs/goverbs/uverbs"
)

// Driver identifies the kernel driver behind a device (enum rdma_driver_id).
// The uverbs ioctl header must carry it, and it selects the provider.
type Driver uint32

// Drivers goverbs knows by name.
const (
	DriverUnknown Driver = uverbs.RDMA_DRIVER_UNKNOWN
	DriverMLX5    Driver = uverbs.RDMA_DRIVER_MLX5
	DriverMLX4    Driver = uverbs.RDMA_DRIVER_MLX4
	DriverRXE     Driver = uverbs.RDMA_DRIVER_RXE
	DriverSIW     Driver = uverbs.RDMA_DRIVER_SIW
	DriverEFA     Driver = uverbs.RDMA_DRIVER_EFA
	DriverIRDMA   Driver = uverbs.RDMA_DRIVER_IRDMA
	DriverBNXTRE  Driver = uverbs.RDMA_DRIVER_BNXT_RE
	DriverHNS     Driver = uverbs.RDMA_DRIVER_HNS
	DriverERDMA   Driver = uverbs.RDMA_DRIVER_ERDMA
	DriverPVRDMA  Driver = uverbs.RDMA_DRIVER_VMW_PVRDMA
)

var driverNames = map[Driver]string{
	uverbs.RDMA_DRIVER_UNKNOWN: "unknown", uverbs.RDMA_DRIVER_MLX5: "mlx5", uverbs.RDMA_DRIVER_MLX4: "mlx4",
	uverbs.RDMA_DRIVER_CXGB3: "cxgb3", uverbs.RDMA_DRIVER_CXGB4: "cxgb4", uverbs.RDMA_DRIVER_MTHCA: "mthca",
	uverbs.RDMA_DRIVER_BNXT_RE: "bnxt_re", uverbs.RDMA_DRIVER_OCRDMA: "ocrdma", uverbs.RDMA_DRIVER_NES: "nes",
	uverbs.RDMA_DRIVER_IRDMA: "irdma", uverbs.RDMA_DRIVER_VMW_PVRDMA: "vmw_pvrdma",
	uverbs.RDMA_DRIVER_QEDR: "qedr", uverbs.RDMA_DRIVER_HNS: "hns", uverbs.RDMA_DRIVER_USNIC: "usnic",
	uverbs.RDMA_DRIVER_RXE: "rxe", uverbs.RDMA_DRIVER_HFI1: "hfi1", uverbs.RDMA_DRIVER_QIB: "qib",
	uverbs.RDMA_DRIVER_EFA: "efa", uverbs.RDMA_DRIVER_SIW: "siw", uverbs.RDMA_DRIVER_ERDMA: "erdma",
}

// String returns the driver's short name ("rxe", "mlx5").
func (d Driver) String() string {
	if n, ok := driverNames[d]; ok {
		return n
	}
	return "driver(" + strconv.FormatUint(uint64(d), 10) + ")"
}

// GUID is a 64-bit InfiniBand GUID in wire (big-endian) byte order.
type GUID [8]byte

// GUIDFromUint64 converts a host-order value (as RDMA netlink reports it).
func GUIDFromUint64(v uint64) GUID {
	var g GUID
	binary.BigEndian.PutUint64(g[:], v)
	return g
}

// Uint64 returns the GUID as a host-order value.
func (g GUID) Uint64() uint64 { return binary.BigEndian.Uint64(g[:]) }

// String formats the GUID the way sysfs and ibv_devinfo do:
// "1810:2dff:fe32:3f2d".
func (g GUID) String() string {
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
}

// NodeType is the kind of RDMA node (enum rdma_node_type).
type NodeType uint8

// Node types.
const (
	NodeCA          NodeType = 1 // channel adapter (InfiniBand, RoCE)
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4 // iWARP
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// String names the node type as ibv_node_type_str does ("InfiniBand
// channel adapter", "iWARP NIC"), "unknown" outside the enum.
func (n NodeType) String() string {
	switch n {
	case NodeCA:
		return "InfiniBand channel adapter"
	case NodeSwitch:
		return "InfiniBand switch"
	case NodeRouter:
		return "InfiniBand router"
	case NodeRNIC:
		return "iWARP NIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	case NodeUnspecified:
		return "unspecified"
	}
	return "unknown"
}

// Transport is the transport of a device, as libibverbs derives it from the
// node type (enum ibv_transport_type).
type Transport int

// Transports.
const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// Transport derives the transport from the node type.
func (n NodeType) Transport() Transport {
	switch n {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

// String names the transport as ibv_devinfo does.
func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	}
	return "invalid transport"
}

// Device describes an RDMA device and its uverbs character device. It is
// plain data: Open turns it into a Context.
type Device struct {
	Name         string   // "rxe0"
	Index        uint32   // the kernel's ibdev index (RDMA netlink DEV_INDEX; rdma_cm reports it too)
	IndexKnown   bool     // false when discovered through sysfs only
	Driver       Driver   // RDMA_DRIVER_*; selects the provider
	NodeGUID     GUID     //
	SysImageGUID GUID     //
	NodeType     NodeType //
	Ports        int      // number of ports, numbered from 1
	Protocol     string   // "roce", "iw", "ib" (netlink only)
	CharDev      string   // "uverbs0"; empty when ib_uverbs is not loaded
	Path         string   // "/dev/infiniband/uverbs0"
	Dev          uint64   // device number of Path (unix.Mkdev form)
	ABIVersion   uint64   // the driver's uverbs ABI version
	IBDevPath    string   // its sysfs directory, "/sys/class/infiniband/rxe0" (libibverbs' ibdev_path)
}

// Devices lists the RDMA devices of this host, ordered by index. It asks
// RDMA netlink first (the only way to learn the driver of a virtual device
// such as rxe) and falls back to sysfs on kernels without it.
func Devices() ([]Device, error) {
	// A test's fake kernel (internal/uverbshook) with a sysfs tree of its
	// own: its devices are there, as libibverbs finds them under
	// $SYSFS_PATH.
	if uverbshook.SysfsRoot() != "" {
		return devicesFromSysfs()
	}
	devs, nlErr := devicesFromNetlink()
	if nlErr == nil {
		return devs, nil
	}
	devs, err := devicesFromSysfs()
	if err != nil {
		return nil, errors.Join(nlErr, err)
	}
	return devs, nil
}

// LookupDevice finds a device by name. It returns an error wrapping
// ErrNoDevice when there is none.
func LookupDevice(name string) (Device, error) {
	devs, err := Devices()
	if err != nil {
		return Device{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return Device{}, fmt.Errorf("verbs: device %q: %w", name, ErrNoDevice)
}

func devicesFromNetlink() ([]Device, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	nl, err := c.Devices()
	if err != nil {
		return nil, err
	}
	devs := make([]Device, 0, len(nl))
	for _, n := range nl {
		d := Device{
			Name:         n.Name,
			Index:        n.Index,
			IndexKnown:   true,
			NodeGUID:     GUIDFromUint64(n.NodeGUID),
			SysImageGUID: GUIDFromUint64(n.SysImageGUID),
			NodeType:     NodeType(n.NodeType),
			Ports:        int(n.Ports),
			Protocol:     n.Protocol,
			IBDevPath:    filepath.Join(sysfs(), "class/infiniband", n.Name),
		}
		// A device without ib_uverbs bound has no chardev: EOPNOTSUPP or
		// ENOENT. It is still listed, but cannot be opened.
		if cd, err := c.Chardev(n.Index, "uverbs"); err == nil && cd.Name != "" {
			maj, min := rdmanl.DecodeDev(cd.Dev)
			d.CharDev = cd.Name
			d.Path = "/dev/infiniband/" + cd.Name
			d.Dev = unix.Mkdev(maj, min)
			d.ABIVersion = cd.ABI
			d.Driver = Driver(cd.DriverID)
		}
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	return devs, nil
}

// sysfsRoot is replaced by tests.
var sysfsRoot = "/sys"

// sysfs returns the sysfs root: sysfsRoot, or that of a test's fake
// kernel (internal/uverbshook.Sysfs).
func sysfs() string {
	if root := uverbshook.SysfsRoot(); root != "" {
		return root
	}
	return sysfsRoot
}

func readSysfs(path ...string) (string, error) {
	b, err := os.ReadFile(filepath.Join(append([]string{sysfs()}, path...)...))
	return strings.TrimSpace(string(b)), err
}

// validDeviceName reports whether name can be an RDMA device's name: it is
// used as a path element under /sys/class/infiniband, so it must be one.
func validDeviceName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") && len(name) < uverbs.IB_DEVICE_NAME_MAX
}

func parseSysfsGUID(s string) (GUID, error) {
	var g GUID
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return g, fmt.Errorf("verbs: malformed GUID %q", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return g, fmt.Errorf("verbs: malformed GUID %q", s)
		}
		binary.BigEndian.PutUint16(g[2*i:], uint16(v))
	}
	return g, nil
}

// devicesFromSysfs walks /sys/class/infiniband_verbs. It cannot learn the
// ibdev index, and it guesses the driver: software devices made with
// "rdma link add" have a parent file (rxe for a CA, siw for an RNIC);
// hardware devices name their PCI driver.
func devicesFromSysfs() ([]Device, error) {
	root := sysfs()
	entries, err := os.ReadDir(filepath.Join(root, "class/infiniband_verbs"))
	if errors.Is(err, os.ErrNotExist) {
		// No ib_uverbs class at all: a host without RDMA has no devices.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verbs: listing devices through sysfs: %w", err)
	}
	var devs []Device
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		cd := e.Name()
		name, err := readSysfs("class/infiniband_verbs", cd, "ibdev")
		if err != nil || !validDeviceName(name) {
			continue
		}
		d := Device{Name: name, CharDev: cd, Path: "/dev/infiniband/" + cd, IBDevPath: filepath.Join(root, "class/infiniband", name)}
		if s, err := readSysfs("class/infiniband_verbs", cd, "dev"); err == nil {
			var maj, min uint32
			if _, err := fmt.Sscanf(s, "%d:%d", &maj, &min); err == nil {
				d.Dev = unix.Mkdev(maj, min)
			}
		}
		if s, err := readSysfs("class/infiniband_verbs", cd, "abi_version"); err == nil {
			d.ABIVersion, _ = strconv.ParseUint(s, 10, 64)
		}
		if s, err := readSysfs("class/infiniband", name, "node_guid"); err == nil {
			d.NodeGUID, _ = parseSysfsGUID(s)
		}
		if s, err := readSysfs("class/infiniband", name, "sys_image_guid"); err == nil {
			d.SysImageGUID, _ = parseSysfsGUID(s)
		}
		if s, err := readSysfs("class/infiniband", name, "node_type"); err == nil {
			if n, _, ok := strings.Cut(s, ":"); ok {
				v, _ := strconv.Atoi(n)
				d.NodeType = NodeType(v)
			}
		}
		if ports, err := os.ReadDir(filepath.Join(root, "class/infiniband", name, "ports")); err == nil {
			d.Ports = len(ports)
		}
		d.Driver = guessDriver(name, d.NodeType)
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].CharDev < devs[j].CharDev })
	return devs, nil
}

var pciDrivers = map[string]Driver{
	"mlx5_core": DriverMLX5, "mlx4_core": DriverMLX4, "efa": DriverEFA, "irdma": DriverIRDMA,
	"bnxt_en": DriverBNXTRE, "hns3": DriverHNS, "erdma": DriverERDMA,
	"vmw_pvrdma": DriverPVRDMA, // the PCI function is the RDMA device's own
}

// siwNodeDesc is the node description siw gives its devices
// (SIW_NODE_DESC_COMMON in siw-abi.h, a string macro mkabi.sh does not
// extract).
const siwNodeDesc = "Software iWARP stack"

func guessDriver(name string, nt NodeType) Driver {
	// siw devices have neither a parent nor a device link in sysfs; they
	// say what they are in node_desc.
	if desc, err := readSysfs("class/infiniband", name, "node_desc"); err == nil && nt == NodeRNIC && desc == siwNodeDesc {
		return DriverSIW
	}
	if _, err := os.Stat(filepath.Join(sysfs(), "class/infiniband", name, "parent")); err == nil {
		if nt == NodeRNIC {
			return DriverSIW
		}
		return DriverRXE
	}
	if link, err := os.Readlink(filepath.Join(sysfs(), "class/infiniband", name, "device/driver")); err == nil {
		if d, ok := pciDrivers[filepath.Base(link)]; ok {
			return d
		}
	}
	return DriverUnknown
}

// Resources returns the kernel's count of live objects of each kind on the
// device, across all processes ("pd", "cq", "qp", "cm_id", "mr", "ctx",
// "srq"), as "rdma resource show" prints them. Tests use it to prove that
// nothing leaks.
func (d Device) Resources() (map[string]uint64, error) {
	if !d.IndexKnown {
		return nil, fmt.Errorf("verbs: resources of %s: device index unknown (RDMA netlink unavailable)", d.Name)
	}
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Resources(d.Index)
}

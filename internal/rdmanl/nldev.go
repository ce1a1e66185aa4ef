package rdmanl

import (
	"github.com/goverbs/goverbs/uverbs"
)

// Device is one RDMA device as RDMA_NLDEV_CMD_GET reports it.
type Device struct {
	Index        uint32
	Name         string
	Ports        uint32 // number of ports (PORT_INDEX on a device message)
	CapFlags     uint64
	FWVersion    string
	NodeGUID     uint64 // host order; prints like sysfs
	SysImageGUID uint64
	NodeType     uint8
	Protocol     string // "roce", "iw", "ib"
}

// Chardev is a device's character device of one type ("uverbs").
type Chardev struct {
	Name     string // "uverbs0"
	ABI      uint64 // driver ABI version
	Dev      uint64 // dev_t in huge_encode_dev form
	DriverID uint32 // RDMA_DRIVER_*
}

// Port is a device port as RDMA_NLDEV_CMD_PORT_GET reports it.
type Port struct {
	DevIndex  uint32
	DevName   string
	Port      uint32
	NetdevIdx uint32
	Netdev    string
	State     uint8
	PhysState uint8
}

// Devices lists every RDMA device.
func (c *Conn) Devices() ([]Device, error) {
	msgs, err := c.Execute("GET", uverbs.RDMA_NLDEV_CMD_GET, true, nil)
	if err != nil {
		return nil, err
	}
	devs := make([]Device, 0, len(msgs))
	for _, a := range msgs {
		devs = append(devs, Device{
			Index:        a.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX),
			Name:         a.String(uverbs.RDMA_NLDEV_ATTR_DEV_NAME),
			Ports:        a.U32(uverbs.RDMA_NLDEV_ATTR_PORT_INDEX),
			CapFlags:     a.U64(uverbs.RDMA_NLDEV_ATTR_CAP_FLAGS),
			FWVersion:    a.String(uverbs.RDMA_NLDEV_ATTR_FW_VERSION),
			NodeGUID:     a.U64(uverbs.RDMA_NLDEV_ATTR_NODE_GUID),
			SysImageGUID: a.U64(uverbs.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID),
			NodeType:     a.U8(uverbs.RDMA_NLDEV_ATTR_DEV_NODE_TYPE),
			Protocol:     a.String(uverbs.RDMA_NLDEV_ATTR_DEV_PROTOCOL),
		})
	}
	return devs, nil
}

// Chardev asks for the character device of type typ ("uverbs") of the
// device with index dev.
func (c *Conn) Chardev(dev uint32, typ string) (Chardev, error) {
	var e Encoder
	e.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	e.String(uverbs.RDMA_NLDEV_ATTR_CHARDEV_TYPE, typ)
	msgs, err := c.Execute("GET_CHARDEV", uverbs.RDMA_NLDEV_CMD_GET_CHARDEV, false, e.Bytes())
	if err != nil {
		return Chardev{}, err
	}
	var cd Chardev
	for _, a := range msgs {
		cd = Chardev{
			Name:     a.String(uverbs.RDMA_NLDEV_ATTR_CHARDEV_NAME),
			ABI:      a.U64(uverbs.RDMA_NLDEV_ATTR_CHARDEV_ABI),
			Dev:      a.U64(uverbs.RDMA_NLDEV_ATTR_CHARDEV),
			DriverID: a.U32(uverbs.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID),
		}
	}
	return cd, nil
}

// Ports lists the ports of the device with index dev and the netdevs they
// are bound to. (The kernel dumps ports one device at a time.)
func (c *Conn) Ports(dev uint32) ([]Port, error) {
	var e Encoder
	e.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	msgs, err := c.Execute("PORT_GET", uverbs.RDMA_NLDEV_CMD_PORT_GET, true, e.Bytes())
	if err != nil {
		return nil, err
	}
	ports := make([]Port, 0, len(msgs))
	for _, a := range msgs {
		ports = append(ports, Port{
			DevIndex:  a.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX),
			DevName:   a.String(uverbs.RDMA_NLDEV_ATTR_DEV_NAME),
			Port:      a.U32(uverbs.RDMA_NLDEV_ATTR_PORT_INDEX),
			NetdevIdx: a.U32(uverbs.RDMA_NLDEV_ATTR_NDEV_INDEX),
			Netdev:    a.String(uverbs.RDMA_NLDEV_ATTR_NDEV_NAME),
			State:     a.U8(uverbs.RDMA_NLDEV_ATTR_PORT_STATE),
			PhysState: a.U8(uverbs.RDMA_NLDEV_ATTR_PORT_PHYS_STATE),
		})
	}
	return ports, nil
}

// NewLink creates a software RDMA device name of type linkType ("rxe" or
// "siw") on the network device netdev, as "rdma link add" does.
func (c *Conn) NewLink(name, linkType, netdev string) error {
	var e Encoder
	e.String(uverbs.RDMA_NLDEV_ATTR_DEV_NAME, name)
	e.String(uverbs.RDMA_NLDEV_ATTR_LINK_TYPE, linkType)
	e.String(uverbs.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	_, err := c.Execute("NEWLINK", uverbs.RDMA_NLDEV_CMD_NEWLINK, false, e.Bytes())
	return err
}

// DelLink deletes the software RDMA device with index dev.
func (c *Conn) DelLink(dev uint32) error {
	var e Encoder
	e.U32(uverbs.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	_, err := c.Execute("DELLINK", uverbs.RDMA_NLDEV_CMD_DELLINK, false, e.Bytes())
	return err
}

// DecodeDev splits a dev_t in the kernel's huge_encode_dev form into major
// and minor numbers.
func DecodeDev(v uint64) (major, minor uint32) {
	return uint32((v & 0xfff00) >> 8), uint32((v & 0xff) | ((v >> 12) & 0xfff00))
}

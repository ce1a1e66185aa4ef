package verbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rdmanl"
)

// Link is a software RDMA device (rxe, siw) and the network device it runs
// on, as "rdma link" shows it.
type Link struct {
	Name      string
	Index     uint32
	Driver    Driver
	Port      int
	Netdev    string
	State     PortState
	PhysState uint8
}

// Links lists the ports of every RDMA device with their network devices.
// Filter on Driver for the software devices of one kind.
func Links() ([]Link, error) {
	devs, err := devicesFromNetlink()
	if err != nil {
		return nil, err
	}
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var links []Link
	for _, d := range devs {
		ports, err := c.Ports(d.Index)
		if errors.Is(err, unix.ENODEV) {
			continue // deleted since the device dump
		}
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			links = append(links, Link{
				Name: d.Name, Index: d.Index, Driver: d.Driver, Port: int(p.Port),
				Netdev: p.Netdev, State: PortState(p.State), PhysState: p.PhysState,
			})
		}
	}
	return links, nil
}

// AddLink creates a software RDMA device called name of kind driver
// (DriverRXE or DriverSIW) on the network device netdev, as
// "rdma link add NAME type rxe netdev NETDEV" does. It needs CAP_NET_ADMIN.
func AddLink(name string, driver Driver, netdev string) error {
	if driver != DriverRXE && driver != DriverSIW {
		return fmt.Errorf("verbs: add link %s: %s devices cannot be created, only rxe and siw", name, driver)
	}
	if name == "" || len(name) >= 64 {
		return fmt.Errorf("verbs: add link: invalid device name %q", name)
	}
	c, err := rdmanl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	err = c.NewLink(name, driver.String(), netdev)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("verbs: add %s link %s: no network device %q: %w", driver, name, netdev, err)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("verbs: add %s link %s: a device with that name, or an %s device on %s, exists: %w", driver, name, driver, netdev, err)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("verbs: add %s link %s on %s: the kernel rejected it (is the rdma_%s module available? modprobe rdma_%s): %w",
			driver, name, netdev, driver, driver, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("verbs: add %s link %s: needs CAP_NET_ADMIN (run as root): %w", driver, name, err)
	}
	return fmt.Errorf("verbs: add %s link %s on %s: %w", driver, name, netdev, err)
}

// DeleteLink deletes the software RDMA device called name. Hardware
// devices cannot be deleted; the kernel refuses with EOPNOTSUPP.
func DeleteLink(name string) error {
	dev, err := LookupDevice(name)
	if err != nil {
		return err
	}
	c, err := rdmanl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.DelLink(dev.Index); err != nil {
		return fmt.Errorf("verbs: delete link %s: %w", name, err)
	}
	return nil
}

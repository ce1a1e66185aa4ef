package verbs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGuessDriver: sysfs discovery names the driver from what sysfs shows
// of a device: siw its node description, rxe its parent netdev link, a
// PCI device the driver its device link points at (vmw_pvrdma binds the
// RDMA function itself, the others their NIC's core driver).
func TestGuessDriver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodeType NodeType
		desc     string // node_desc
		parent   bool   // a parent file (rxe, siw on 6.x)
		pci      string // the PCI driver device/driver links to
		want     Driver
	}{
		{name: "siw0", nodeType: NodeRNIC, desc: siwNodeDesc, want: DriverSIW},
		{name: "rxe0", nodeType: NodeCA, parent: true, want: DriverRXE},
		{name: "vmw_pvrdma0", nodeType: NodeCA, pci: "vmw_pvrdma", want: DriverPVRDMA},
		{name: "mlx5_0", nodeType: NodeCA, pci: "mlx5_core", want: DriverMLX5},
		{name: "odd0", nodeType: NodeCA, pci: "no_such_driver", want: DriverUnknown},
		{name: "bare0", nodeType: NodeCA, want: DriverUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "class/infiniband", tc.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.desc != "" {
				if err := os.WriteFile(filepath.Join(dir, "node_desc"), []byte(tc.desc+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.parent {
				if err := os.WriteFile(filepath.Join(dir, "parent"), []byte("veth0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.pci != "" {
				if err := os.MkdirAll(filepath.Join(dir, "device"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("../../../../bus/pci/drivers/"+tc.pci, filepath.Join(dir, "device/driver")); err != nil {
					t.Fatal(err)
				}
			}
			old := sysfsRoot
			sysfsRoot = root
			t.Cleanup(func() { sysfsRoot = old })
			if got := guessDriver(tc.name, tc.nodeType); got != tc.want {
				t.Errorf("guessDriver(%s) = %s, want %s", tc.name, got, tc.want)
			}
		})
	}
}

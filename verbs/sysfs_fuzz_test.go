package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseSysfsGUID: a GUID in sysfs form parses to the GUID that prints
// the same way, and nothing else parses without an error.
func FuzzParseSysfsGUID(f *testing.F) {
	for _, s := range []string{"945f:e7ff:fee6:9703", "0000:0000:0000:0000", "ffff:ffff:ffff:ffff", "1:2:3:4", "945fe7fffee69703", ":::", "+1:-0:0x1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := parseSysfsGUID(s)
		if err != nil {
			return
		}
		back, err := parseSysfsGUID(g.String())
		if err != nil || back != g {
			t.Fatalf("%q parsed to %s, which parses back to %s, %v", s, g, back, err)
		}
	})
}

// FuzzDevicesFromSysfs builds a sysfs tree with one device whose attribute
// files hold the fuzzer's bytes: discovery never panics, never follows a
// device name out of the class directories, and reports what the files say.
func FuzzDevicesFromSysfs(f *testing.F) {
	f.Add("rxe0", "231:192", "1", "945f:e7ff:fee6:9703", "1: CA", uint8(1))
	f.Add("siw0", "231:193", "6", "0250:b6ff:fe11:2233", "4: RNIC", uint8(1))
	f.Add("../../etc", "x:y", "-1", "zz", "", uint8(0))
	f.Add("", "", "", "", ":", uint8(3))
	f.Fuzz(func(t *testing.T, ibdev, dev, abi, guid, nodeType string, ports uint8) {
		root := t.TempDir()
		write := func(content string, path ...string) {
			p := filepath.Join(append([]string{root}, path...)...)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(ibdev, "class/infiniband_verbs/uverbs0/ibdev")
		write(dev, "class/infiniband_verbs/uverbs0/dev")
		write(abi, "class/infiniband_verbs/uverbs0/abi_version")
		name := strings.TrimSpace(ibdev)
		safe := validDeviceName(name)
		if safe {
			write(guid, "class/infiniband", name, "node_guid")
			write(nodeType, "class/infiniband", name, "node_type")
			for p := 1; p <= int(ports%8); p++ {
				if err := os.MkdirAll(filepath.Join(root, "class/infiniband", name, "ports", string(rune('0'+p))), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		old := sysfsRoot
		sysfsRoot = root
		defer func() { sysfsRoot = old }()

		devs, err := devicesFromSysfs()
		if err != nil {
			t.Fatal(err)
		}
		if !safe {
			if len(devs) != 0 {
				t.Fatalf("device name %q accepted: %+v", name, devs)
			}
			return
		}
		if len(devs) != 1 {
			t.Fatalf("%d devices from one uverbs entry", len(devs))
		}
		d := devs[0]
		if d.Name != name || d.CharDev != "uverbs0" || d.Path != "/dev/infiniband/uverbs0" {
			t.Errorf("device %+v from ibdev %q", d, ibdev)
		}
		if d.Ports != int(ports%8) {
			t.Errorf("%d ports, want %d", d.Ports, ports%8)
		}
		if g, err := parseSysfsGUID(strings.TrimSpace(guid)); err == nil && g != d.NodeGUID {
			t.Errorf("node GUID %s, the file says %s", d.NodeGUID, g)
		}
	})
}

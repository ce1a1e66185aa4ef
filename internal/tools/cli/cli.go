// Package cli holds what goverbs' command-line tools share: glibc-style
// option parsing (Getopt), the "goverbs TOOL: ..." error line, how the C
// tools pick a device, and the C tools' number and MTU arguments.
//
// Each tool lives in a package of its own under internal/tools and
// exports
//
//	func Main(args []string, stdout, stderr io.Writer) int
//
// which cmd/goverbs/main.go routes its subcommand to.
package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/verbs"
)

// Errorf prints a "goverbs CMD: ..." line to w.
func Errorf(w io.Writer, cmd, format string, args ...any) {
	fmt.Fprintf(w, "goverbs %s: %s\n", cmd, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// PickDevice is how the C tools choose a device: the one named, or the
// first listed when no name is given; nil when there is none.
func PickDevice(devs []verbs.Device, name string) *verbs.Device {
	for i := range devs {
		if name == "" || devs[i].Name == name {
			return &devs[i]
		}
	}
	return nil
}

// ParseCInt parses a number the way strtol with base 0 reads it (0x for
// hex, a leading 0 for octal), but refuses anything that is not entirely a
// number rather than stopping at the first bad character.
func ParseCInt(s string) (int64, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base := 10
	switch {
	case len(t) > 2 && (t[:2] == "0x" || t[:2] == "0X"):
		base, t = 16, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	v, err := strconv.ParseInt(t, base, 64)
	if err != nil || t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	if neg {
		v = -v
	}
	return v, nil
}

// MTUFromBytes is the MTU of n bytes (256, 512, 1024, 2048 or 4096), as
// the C tools' mtu_to_enum; 0 for any other n.
func MTUFromBytes(n int64) verbs.MTU {
	switch n {
	case 256:
		return verbs.MTU256
	case 512:
		return verbs.MTU512
	case 1024:
		return verbs.MTU1024
	case 2048:
		return verbs.MTU2048
	case 4096:
		return verbs.MTU4096
	}
	return 0
}

// Package pingpong is goverbs pingpong: rdma-core's ibv_rc_pingpong, ibv_uc_pingpong,
// ibv_ud_pingpong and ibv_srq_pingpong (rdma-core 44) in one subcommand.
// Either end may be the C tool: the TCP exchange, the work requests and
// the output follow the C programs. This file holds the command line; the
// TCP exchange is in pingpong_exch.go, the verbs side in pingpong_ctx.go.
package pingpong

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/goverbs/goverbs/internal/tools/cli"
	"github.com/goverbs/goverbs/verbs"
)

// ppType is the transport of a ping-pong, the C tool it stands for.
type ppType int

const (
	ppRC ppType = 1 << iota
	ppUC
	ppUD
	ppSRQ

	ppAll = ppRC | ppUC | ppUD | ppSRQ
)

func (t ppType) String() string {
	switch t {
	case ppRC:
		return "rc"
	case ppUC:
		return "uc"
	case ppUD:
		return "ud"
	case ppSRQ:
		return "srq"
	}
	return "?"
}

// tool names the rdma-core program the type mirrors.
func (t ppType) tool() string { return "ibv_" + t.String() + "_pingpong" }

// ppOptions are the settings of one run, with the C tools' defaults.
type ppOptions struct {
	typ      ppType
	port     int    // TCP port
	devName  string // "" = first device
	ibPort   int
	size     int
	mtu      verbs.MTU
	numQP    int // srq
	rxDepth  int
	iters    int
	sl       int
	events   bool
	gidIndex int // -1: no GID
	validate bool
	server   string // "" = server
}

// ppFlag is one option of the C tools (getopt_long style: short letter,
// long name) and the tools that have it.
type ppFlag struct {
	short       byte // 0: long only
	long        string
	hasArg      bool
	tools       ppType
	unsupported bool // the C tool has it, goverbs does not do it
	help        string
}

var ppFlags = []ppFlag{
	{'t', "type", true, ppAll, false, "transport: rc (default), uc, ud or srq"},
	{'p', "port", true, ppAll, false, "listen on/connect to port <port> (default 18515)"},
	{'d', "ib-dev", true, ppAll, false, "use IB device <dev> (default first device found)"},
	{'i', "ib-port", true, ppAll, false, "use port <port> of IB device (default 1)"},
	{'s', "size", true, ppAll, false, "size of message to exchange (default 4096; ud: 1024)"},
	{'m', "mtu", true, ppRC | ppUC | ppSRQ, false, "path MTU (default 1024)"},
	{'q', "num-qp", true, ppSRQ, false, "number of QPs to use (default 16)"},
	{'r', "rx-depth", true, ppAll, false, "number of receives to post at a time (default 500)"},
	{'n', "iters", true, ppAll, false, "number of exchanges (default 1000)"},
	{'l', "sl", true, ppAll, false, "service level value"},
	{'e', "events", false, ppAll, false, "sleep on CQ events (default poll)"},
	{'g', "gid-idx", true, ppAll, false, "local port gid index"},
	{'c', "chk", false, ppAll, false, "validate received buffer"},
	{'o', "odp", false, ppRC | ppSRQ, true, "use on demand paging"},
	{'O', "iodp", false, ppRC, true, "use implicit on demand paging"},
	{'P', "prefetch", false, ppRC, true, "prefetch an ODP MR"},
	{0, "ts", false, ppRC, true, "get CQE with timestamp (ibv_rc_pingpong's -t)"},
	{'j', "dm", false, ppRC, true, "use device memory"},
	{'N', "new_send", false, ppRC, true, "use new post send WR API"},
	{'h', "help", false, ppAll, false, "print this help"},
}

func (f *ppFlag) name() string {
	if f.short != 0 {
		return "-" + string(f.short)
	}
	return "--" + f.long
}

// ppArg is one parsed option.
type ppArg = cli.GetoptArg[*ppFlag]

// ppGetopt is the C pingpong tools' option table for getopt: long names
// may be abbreviated, unknown options worded as glibc words them.
var ppGetopt = cli.GetoptTable[*ppFlag]{
	Short: func(c byte) (*ppFlag, error) {
		if f := lookupShort(c); f != nil {
			return f, nil
		}
		return nil, fmt.Errorf("invalid option -- '%c'", c)
	},
	Long:     lookupLong,
	HasArg:   func(f *ppFlag) bool { return f.hasArg },
	LongName: func(f *ppFlag) string { return f.long },
	Errorf:   fmt.Errorf,
}

func lookupShort(c byte) *ppFlag {
	for i := range ppFlags {
		if ppFlags[i].short == c {
			return &ppFlags[i]
		}
	}
	return nil
}

func lookupLong(name string) (*ppFlag, error) {
	var match *ppFlag
	var candidates []string
	for i := range ppFlags {
		f := &ppFlags[i]
		if f.long == name {
			return f, nil
		}
		if name != "" && strings.HasPrefix(f.long, name) {
			match = f
			candidates = append(candidates, "'--"+f.long+"'")
		}
	}
	switch len(candidates) {
	case 0:
		return nil, fmt.Errorf("unrecognized option '--%s'", name)
	case 1:
		return match, nil
	}
	return nil, fmt.Errorf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(candidates, " "))
}

func parseType(s string) (ppType, bool) {
	switch strings.ToLower(s) {
	case "rc":
		return ppRC, true
	case "uc":
		return ppUC, true
	case "ud":
		return ppUD, true
	case "srq":
		return ppSRQ, true
	}
	return 0, false
}

// parsePingpongArgs turns the command line into options. help is set for
// -h; a returned error is a usage error.
func parsePingpongArgs(args []string) (o *ppOptions, help bool, err error) {
	opts, operands, err := cli.Getopt(args, ppGetopt)
	if err != nil {
		return nil, false, err
	}
	o = &ppOptions{typ: ppRC, port: 18515, ibPort: 1, size: 4096, mtu: verbs.MTU1024,
		numQP: 16, rxDepth: 500, iters: 1000, gidIndex: -1}
	// The type decides which options exist, so it goes first.
	for _, a := range opts {
		if a.Flag.short == 't' {
			t, ok := parseType(a.Value)
			if !ok {
				return nil, false, fmt.Errorf("unknown transport type %q (want rc, uc, ud or srq)", a.Value)
			}
			o.typ = t
		}
	}
	if o.typ == ppUD {
		o.size = 1024
	}
	for _, a := range opts {
		f := a.Flag
		if f.short == 'h' {
			return o, true, nil
		}
		if f.tools&o.typ == 0 {
			return nil, false, fmt.Errorf("%s: %s has no such option", a.Spelt, o.typ.tool())
		}
		if f.unsupported {
			return nil, false, errUnsupported(a.Spelt)
		}
		if !f.hasArg {
			switch f.short {
			case 'e':
				o.events = true
			case 'c':
				o.validate = true
			}
			continue
		}
		if f.short == 't' || f.short == 'd' {
			if f.short == 'd' {
				o.devName = a.Value
			}
			continue
		}
		v, err := cli.ParseCInt(a.Value)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %v", a.Spelt, err)
		}
		bad := func(want string) error {
			return fmt.Errorf("%s %s: %s", a.Spelt, a.Value, want)
		}
		switch f.short {
		case 'p':
			if v < 0 || v > 65535 {
				return nil, false, bad("port must be 0 to 65535")
			}
			o.port = int(v)
		case 'i':
			if v < 1 || v > 255 {
				return nil, false, bad("IB port must be 1 to 255")
			}
			o.ibPort = int(v)
		case 's':
			min := int64(0)
			if o.typ == ppSRQ {
				min = 1
			}
			if v < min || v > math.MaxInt32-40 {
				return nil, false, bad(fmt.Sprintf("size must be %d to %d", min, math.MaxInt32-40))
			}
			o.size = int(v)
		case 'm':
			if o.mtu = cli.MTUFromBytes(v); o.mtu == 0 {
				return nil, false, bad("MTU must be 256, 512, 1024, 2048 or 4096")
			}
		case 'q':
			if v < 0 || v > math.MaxInt32 {
				return nil, false, bad("invalid number of QPs")
			}
			o.numQP = int(v)
		case 'r':
			if v < 0 || v > math.MaxInt32 {
				return nil, false, bad("invalid rx depth")
			}
			o.rxDepth = int(v)
		case 'n':
			if v < 0 || v > math.MaxUint32 {
				return nil, false, bad("invalid iteration count")
			}
			o.iters = int(v)
		case 'l':
			if v < 0 || v > 255 {
				return nil, false, bad("service level must be 0 to 255")
			}
			o.sl = int(v)
		case 'g':
			if v > math.MaxInt32 {
				return nil, false, bad("GID index too large")
			}
			if v < 0 {
				v = -1
			}
			o.gidIndex = int(v)
		}
	}
	switch {
	case len(operands) == 1:
		o.server = operands[0]
	case len(operands) > 1:
		return nil, false, fmt.Errorf("unexpected argument %q", operands[1])
	}
	return o, false, nil
}

type errUnsupported string

func (e errUnsupported) Error() string { return string(e) + " is not supported" }

func pingpongUsage(w io.Writer) {
	fmt.Fprintln(w, "usage:")
	fmt.Fprintln(w, "  goverbs pingpong -t rc|uc|ud|srq [options]             start a server and wait for connection")
	fmt.Fprintln(w, "  goverbs pingpong -t rc|uc|ud|srq [options] <host>      connect to server at <host>")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Like rdma-core's ibv_{rc,uc,ud,srq}_pingpong, with which either end interoperates.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "options:")
	for i := range ppFlags {
		f := &ppFlags[i]
		var tools []string
		if f.tools != ppAll {
			for _, t := range []ppType{ppRC, ppUC, ppUD, ppSRQ} {
				if f.tools&t != 0 {
					tools = append(tools, t.String())
				}
			}
		}
		spec := "    "
		if f.short != 0 {
			spec = "-" + string(f.short) + ", "
		}
		spec += "--" + f.long
		if f.hasArg {
			spec += "=<arg>"
		}
		help := f.help
		if tools != nil {
			help += " [" + strings.Join(tools, ", ") + " only]"
		}
		if f.unsupported {
			help += " (not supported)"
		}
		fmt.Fprintf(w, "  %-26s %s\n", spec, help)
	}
}

// Summary is goverbs pingpong's line in goverbs' command list.
const Summary = "RC/UC/UD/SRQ ping-pong, like ibv_{rc,uc,ud,srq}_pingpong"

// Main is goverbs pingpong: args are its arguments after the subcommand;
// it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	o, help, err := parsePingpongArgs(args)
	if help {
		pingpongUsage(stdout)
		return 0
	}
	if err != nil {
		cli.Errorf(stderr, "pingpong", "%v", err)
		if _, ok := err.(errUnsupported); !ok {
			fmt.Fprintln(stderr, "usage: goverbs pingpong -t rc|uc|ud|srq [options] [servername]   (-h for help)")
		}
		return 1
	}
	return runPP(o, stdout, stderr)
}

package main

import "strings"

// getoptTable is what getopt needs from a tool's option table: how to find
// an option by its letter or long name (each lookup words its own error,
// as the C tool would for an unknown option), whether it takes an
// argument, its long name for messages, and the error type the tool
// reports command-line mistakes with.
type getoptTable[F any] struct {
	short    func(c byte) (F, error)
	long     func(name string) (F, error)
	hasArg   func(F) bool
	longName func(F) string
	errorf   func(format string, args ...any) error
}

// getoptArg is one parsed option.
type getoptArg[F any] struct {
	flag  F
	value string
	spelt string // as written ("-s", "--size"), for messages
}

// getopt splits args as glibc's getopt_long does: short options may be
// bundled (-ec) and take their argument attached or as the next word, long
// options take --name=value or --name value, operands may come anywhere
// (permutation) and "--" ends the options. Whether long names may be
// abbreviated is the table's long lookup's business.
func getopt[F any](args []string, t getoptTable[F]) (opts []getoptArg[F], operands []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			f, err := t.long(name)
			if err != nil {
				return nil, nil, err
			}
			long := t.longName(f)
			switch {
			case t.hasArg(f) && !hasValue:
				if i+1 >= len(args) {
					return nil, nil, t.errorf("option '--%s' requires an argument", long)
				}
				i++
				value = args[i]
			case !t.hasArg(f) && hasValue:
				return nil, nil, t.errorf("option '--%s' doesn't allow an argument", long)
			}
			opts = append(opts, getoptArg[F]{f, value, "--" + long})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				f, err := t.short(a[j])
				if err != nil {
					return nil, nil, err
				}
				spelt := "-" + string(a[j])
				if !t.hasArg(f) {
					opts = append(opts, getoptArg[F]{f, "", spelt})
					continue
				}
				value := a[j+1:]
				if value == "" {
					if i+1 >= len(args) {
						return nil, nil, t.errorf("option requires an argument -- '%c'", a[j])
					}
					i++
					value = args[i]
				}
				opts = append(opts, getoptArg[F]{f, value, spelt})
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

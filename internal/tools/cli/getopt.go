package cli

import "strings"

// GetoptTable is what Getopt needs from a tool's option table: how to find
// an option by its letter or long name (each lookup words its own error,
// as the C tool would for an unknown option), whether it takes an
// argument, its long name for messages, and the error type the tool
// reports command-line mistakes with.
type GetoptTable[F any] struct {
	Short    func(c byte) (F, error)
	Long     func(name string) (F, error)
	HasArg   func(F) bool
	LongName func(F) string
	Errorf   func(format string, args ...any) error
}

// GetoptArg is one parsed option.
type GetoptArg[F any] struct {
	Flag  F
	Value string
	Spelt string // as written ("-s", "--size"), for messages
}

// Getopt splits args as glibc's getopt_long does: short options may be
// bundled (-ec) and take their argument attached or as the next word, long
// options take --name=value or --name value, operands may come anywhere
// (permutation) and "--" ends the options. Whether long names may be
// abbreviated is the table's long lookup's business.
func Getopt[F any](args []string, t GetoptTable[F]) (opts []GetoptArg[F], operands []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			f, err := t.Long(name)
			if err != nil {
				return nil, nil, err
			}
			long := t.LongName(f)
			switch {
			case t.HasArg(f) && !hasValue:
				if i+1 >= len(args) {
					return nil, nil, t.Errorf("option '--%s' requires an argument", long)
				}
				i++
				value = args[i]
			case !t.HasArg(f) && hasValue:
				return nil, nil, t.Errorf("option '--%s' doesn't allow an argument", long)
			}
			opts = append(opts, GetoptArg[F]{f, value, "--" + long})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				f, err := t.Short(a[j])
				if err != nil {
					return nil, nil, err
				}
				spelt := "-" + string(a[j])
				if !t.HasArg(f) {
					opts = append(opts, GetoptArg[F]{f, "", spelt})
					continue
				}
				value := a[j+1:]
				if value == "" {
					if i+1 >= len(args) {
						return nil, nil, t.Errorf("option requires an argument -- '%c'", a[j])
					}
					i++
					value = args[i]
				}
				opts = append(opts, GetoptArg[F]{f, value, spelt})
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

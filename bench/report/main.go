// Command report reads bench/run.sh's output ("round impl name value
// unit" lines) and prints the table of `make bench`: per operation the
// median of C, goverbs and cgo over the rounds, and the median of the
// per-round ratios Go/C and Go/cgo with their range. The ratios compare
// the numbers as printed: for "ns" rows below 1 means goverbs is faster,
// for "kmsg/s" rows above 1 means goverbs is faster.
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

type key struct{ name, impl string }

func main() {
	vals := map[key]map[int]float64{}
	units := map[string]string{}
	var names []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			continue
		}
		r, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		k := key{f[2], f[1]}
		if vals[k] == nil {
			vals[k] = map[int]float64{}
		}
		vals[k][r] = v
		if _, ok := units[f[2]]; !ok {
			names = append(names, f[2])
		}
		units[f[2]] = f[4]
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, "report: no results")
		os.Exit(1)
	}
	// Any other implementation (a bench-gobefore built against an older
	// goverbs, a variant of the method) gets two columns of its own: its
	// median and its ratio to a C reference, see reference.
	seen := map[string]bool{}
	var extra []string
	for k := range vals {
		if k.impl != "c" && k.impl != "go" && k.impl != "cgo" && !seen[k.impl] {
			seen[k.impl] = true
			extra = append(extra, k.impl)
		}
	}
	slices.Sort(extra)
	head, rule := "| op | unit | C | Go | Go/C [range] | cgo | Go/cgo [range] |", "|---|---|---|---|---|---|---|"
	for _, e := range extra {
		head += fmt.Sprintf(" %s | %s/%s [range] |", e, e, reference(e, seen))
		rule += "---|---|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for _, n := range names {
		c, g, x := vals[key{n, "c"}], vals[key{n, "go"}], vals[key{n, "cgo"}]
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |", n, units[n],
			num(median(values(c))), num(median(values(g))), ratio(g, c), num(median(values(x))), ratio(g, x))
		for _, e := range extra {
			b := vals[key{n, e}]
			fmt.Printf(" %s | %s |", num(median(values(b))), ratio(b, vals[key{n, reference(e, seen)}]))
		}
		fmt.Println()
	}
}

// reference is the C implementation an extra one is compared with: a
// "go<variant>" with a "c<variant>" beside it (the same method change made
// to both) is compared with that, anything else with "c".
func reference(impl string, seen map[string]bool) string {
	if v, ok := strings.CutPrefix(impl, "go"); ok && seen["c"+v] {
		return "c" + v
	}
	return "c"
}

func values(m map[int]float64) []float64 {
	var v []float64
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

// ratio is the median of a[r]/b[r] over the rounds both have, with range.
func ratio(a, b map[int]float64) string {
	var rs []float64
	for r, x := range a {
		if y, ok := b[r]; ok && y != 0 {
			rs = append(rs, x/y)
		}
	}
	if len(rs) == 0 {
		return "–"
	}
	slices.Sort(rs)
	return fmt.Sprintf("%.2f [%.2f–%.2f]", median(rs), rs[0], rs[len(rs)-1])
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func num(v float64) string {
	if v == 0 {
		return "–"
	}
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

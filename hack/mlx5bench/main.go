// Command mlx5bench runs make bench-mlx5: the rows of the mlx5 native
// benchmark through libibverbs + libmlx5 (internal/provider/mlx5/difftest/
// c/bench.c under the C fake kernel) and through goverbs (the difftest
// package's TestBenchNative under the Go fake kernel), each run a fresh
// process pinned to one CPU, in interleaved rounds: every round runs every
// row in both programs back to back, the row order rotated by round and
// which program goes first alternating. It prints the raw results and the
// table: per row the median of each program, the median of the per-round
// ratios Go/C with their range, and Go's allocations per operation.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

var rows = []string{"post_send", "post_send_list32", "post_send_inline64", "post_recv", "poll_empty", "poll_16"}

type result struct{ ns, allocs float64 }

func main() {
	rounds := flag.Int("rounds", 9, "rounds")
	cpu := flag.String("cpu", "1", "the CPU every run is pinned to (taskset -c)")
	cBench := flag.String("c", "", "the C benchmark (make mlx5-c's bench)")
	fake := flag.String("fake", "", "the C fake kernel (fake.so)")
	device := flag.String("device", "", "the device description (testdata/device.txt)")
	goTest := flag.String("go", "", "the difftest package's test binary")
	pkgDir := flag.String("dir", "", "the difftest package's directory (the Go run's working directory)")
	only := flag.String("rows", "", "the rows to run (space-separated; default all)")
	flag.Parse()
	if *cBench == "" || *fake == "" || *device == "" || *goTest == "" || *pkgDir == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *only != "" {
		rows = strings.Fields(*only)
	}
	res := map[string]map[string][]result{"c": {}, "go": {}}
	run := func(impl, row string) result {
		var cmd *exec.Cmd
		if impl == "c" {
			cmd = exec.Command("taskset", "-c", *cpu, *cBench, row)
			cmd.Env = append(os.Environ(), "FAKE_DEVICE="+*device, "LD_PRELOAD="+*fake)
		} else {
			cmd = exec.Command("taskset", "-c", *cpu, *goTest, "-test.run", "^TestBenchNative$", "-test.count=1")
			cmd.Env = append(os.Environ(), "MLX5_BENCH_ROW="+row)
			cmd.Dir = *pkgDir
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "mlx5bench: %s %s: %v\n%s%s", impl, row, err, out, stderr.Bytes())
			os.Exit(1)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || f[0] != "bench" || f[1] != row {
				continue
			}
			r := result{allocs: -1}
			r.ns, err = strconv.ParseFloat(f[2], 64)
			if err == nil && len(f) > 3 {
				r.allocs, err = strconv.ParseFloat(f[3], 64)
			}
			if err == nil {
				return r
			}
		}
		fmt.Fprintf(os.Stderr, "mlx5bench: %s %s printed no result:\n%s%s", impl, row, out, stderr.Bytes())
		os.Exit(1)
		return result{}
	}
	for r := 0; r < *rounds; r++ {
		for j := range rows {
			row := rows[(j+r)%len(rows)]
			impls := []string{"c", "go"}
			if (r+j)%2 == 1 {
				impls = []string{"go", "c"}
			}
			for _, impl := range impls {
				x := run(impl, row)
				res[impl][row] = append(res[impl][row], x)
				fmt.Printf("raw %d %s %s %.2f %.3f\n", r, impl, row, x.ns, x.allocs)
			}
		}
	}
	fmt.Printf("\n| row | C ns/op | Go ns/op | Go/C [range] | Go allocs/op |\n|---|---|---|---|---|\n")
	for _, row := range rows {
		c, g := res["c"][row], res["go"][row]
		var cn, gn, ratio []float64
		maxAllocs := 0.0
		for i := range c {
			cn = append(cn, c[i].ns)
			gn = append(gn, g[i].ns)
			ratio = append(ratio, g[i].ns/c[i].ns)
			maxAllocs = max(maxAllocs, g[i].allocs)
		}
		fmt.Printf("| %s | %.1f | %.1f | %.2f [%.2f–%.2f] | %g |\n", row, median(cn), median(gn),
			median(ratio), slices.Min(ratio), slices.Max(ratio), maxAllocs)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

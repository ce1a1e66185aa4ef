# Reads bench/rstream/run.sh's lines and prints per test the medians of
# C's, Go's and TCP's Gb/s and µs per transfer, and the medians of the
# per-round ratios Go/C (throughput: higher is better; latency: lower).
# Rows of cvec (C with memcpy kept off "rep movsb": run.sh) add its µs per
# transfer and Go's per-round ratios to it, Gb/s and µs.
# Other lines (run.sh's note of the guest's clocksource) are not results.
$1 !~ /^[0-9]+$/ || NF != 5 { next }
{ g[$1, $2, $3] = $4; u[$1, $2, $3] = $5; rounds[$1]; if (!($3 in seen)) { seen[$3]; order[++k] = $3 } }
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function med(arr, impl, t,    r, n, x) { n = 0; for (r in rounds) if ((r, impl, t) in arr) x[++n] = arr[r, impl, t]; return n ? median(x, n) : 0 }
function ratio(arr, t, impl, base,    r, n, x) { if (impl == "") impl = "go"; if (base == "") base = "c"; n = 0; for (r in rounds) if ((r, impl, t) in arr && (r, base, t) in arr && arr[r, base, t] > 0) x[++n] = arr[r, impl, t] / arr[r, base, t]; return n ? sprintf("%.2f", median(x, n)) : "–" }
# A gobefore implementation (run.sh's third argument) adds its µs and its
# ratio to C, for a before/after comparison.
END {
	for (key in u) { split(key, f, SUBSEP); if (f[2] == "gobefore") before = 1; if (f[2] == "cvec") cvec = 1 }
	printf "| test | C Gb/s | Go Gb/s | TCP Gb/s | Go/C Gb/s | C µs/xfer | Go µs/xfer | TCP µs/xfer | Go/C µs |%s%s\n", cvec ? " Cvec µs/xfer | Go/Cvec Gb/s | Go/Cvec µs |" : "", before ? " before µs/xfer | before/C µs |" : ""
	printf "|---|---|---|---|---|---|---|---|---|%s%s\n", cvec ? "---|---|---|" : "", before ? "---|---|" : ""
	for (o = 1; o <= k; o++) {
		t = order[o]
		printf "| %s | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %s |", t, med(g, "c", t), med(g, "go", t), med(g, "tcp", t), ratio(g, t), med(u, "c", t), med(u, "go", t), med(u, "tcp", t), ratio(u, t)
		if (cvec) printf " %.2f | %s | %s |", med(u, "cvec", t), ratio(g, t, "go", "cvec"), ratio(u, t, "go", "cvec")
		if (before) printf " %.2f | %s |", med(u, "gobefore", t), ratio(u, t, "gobefore")
		printf "\n"
	}
}

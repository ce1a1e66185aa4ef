# Reads bench/valkey/run.sh's lines ("round impl size keys set_us get_us")
# and prints per value size the medians of each client's operations per
# second (SETs and GETs together: 2 keys / (set_us + get_us)) and Go/C as
# the median of the per-round ratios, with their range. Any other client
# (run.sh's bench-valkey-NAME) adds its ops/s, its ratio to C and Go's
# ratio to it.
# Other lines (the guest's clocksource) are not results.
$1 !~ /^[0-9]+$/ || NF != 6 { next }
{
	ops[$1, $2, $3] = 2 * $4 / (($5 + $6) / 1e6)
	rounds[$1]
	if (!($3 in seen)) { seen[$3]; order[++k] = $3 }
	if ($2 == "cvec") cvec = 1
	if ($2 !~ /^(c|go|tcp|cvec)$/ && !($2 in extra)) { extra[$2]; extras[++ne] = $2 }
}
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function med(impl, s,    r, n, x) { n = 0; for (r in rounds) if ((r, impl, s) in ops) x[++n] = ops[r, impl, s]; return n ? sprintf("%.0f", median(x, n)) : "–" }
function ratio(impl, base, s,    r, n, x, lo, hi) {
	n = 0
	for (r in rounds) if ((r, impl, s) in ops && (r, base, s) in ops) x[++n] = ops[r, impl, s] / ops[r, base, s]
	if (!n) return "–"
	lo = hi = x[1]
	for (r = 2; r <= n; r++) { if (x[r] < lo) lo = x[r]; if (x[r] > hi) hi = x[r] }
	return sprintf("%.2f [%.2f–%.2f]", median(x, n), lo, hi)
}
END {
	printf "| value | C ops/s | Go ops/s | Go/C | Go TCP ops/s | TCP/Go RDMA |%s", cvec ? " Cvec ops/s | Go/Cvec |" : ""
	for (e = 1; e <= ne; e++) printf " %s ops/s | %s/C | Go/%s |", extras[e], extras[e], extras[e]
	printf "\n|---|---|---|---|---|---|%s", cvec ? "---|---|" : ""
	for (e = 1; e <= ne; e++) printf "---|---|---|"
	printf "\n"
	for (o = 1; o <= k; o++) {
		s = order[o]
		printf "| %s B | %s | %s | %s | %s | %s |", s, med("c", s), med("go", s), ratio("go", "c", s), med("tcp", s), ratio("tcp", "go", s)
		if (cvec) printf " %s | %s |", med("cvec", s), ratio("go", "cvec", s)
		for (e = 1; e <= ne; e++) printf " %s | %s | %s |", med(extras[e], s), ratio(extras[e], "c", s), ratio("go", extras[e], s)
		printf "\n"
	}
}

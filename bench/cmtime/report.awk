# Reads bench/cmtime/run.sh's lines and prints, per connection count and
# step, C's and Go's median total (ms) and the median of the per-round
# Go/C ratios, as a markdown table.
{ v[$1, $2, $3, $4] = $5; rounds[$1]; sizes[$3]; if (!(($3, $4) in seen)) { seen[$3, $4]; order[++k] = $3 SUBSEP $4 } }
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	print "| connections | step | C ms | Go ms | Go/C [range] |"
	print "|---|---|---|---|---|"
	for (o = 1; o <= k; o++) {
		split(order[o], p, SUBSEP); n = p[1]; s = p[2]
		nc = ng = nr = 0; lo = 1e18; hi = 0
		for (r in rounds) {
			if ((r, "c", n, s) in v) c[++nc] = v[r, "c", n, s]
			if ((r, "go", n, s) in v) g[++ng] = v[r, "go", n, s]
			if ((r, "c", n, s) in v && (r, "go", n, s) in v && v[r, "c", n, s] > 0) {
				q = v[r, "go", n, s] / v[r, "c", n, s]; rr[++nr] = q
				if (q < lo) lo = q; if (q > hi) hi = q
			}
		}
		name = s; gsub(/_/, " ", name)
		printf "| %d | %s | %.2f | %.2f | %s |\n", n, name, median(c, nc), median(g, ng), nr ? sprintf("%.2f [%.2f–%.2f]", median(rr, nr), lo, hi) : "–"
	}
}

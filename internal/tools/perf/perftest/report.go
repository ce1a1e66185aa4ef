package perftest

import (
	"fmt"
	"io"
	"math"
	"slices"
)

// Output lines and column headers, as perftest prints them.
const (
	ResultLine   = "---------------------------------------------------------------------------------------\n"
	BWHeader     = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	BWHeaderG    = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	LatHeader    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	bwFormat     = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	bwFormatExt  = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n"
	latFormat    = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"
	mbFactor     = 0x100000  // MB/s: 2^20 bytes
	gbFactor     = 125000000 // Gb/s: 10^9 bits
	latTail      = 2         // LAT_MEASURE_TAIL: the largest samples dropped
	perSecond    = 1e9       // the timestamps are nanoseconds
	perMicro     = 1e3
	mppsDivisor  = 1e6
	peakMaxIters = 20000 // above, perftest skips the peak (-N)
)

// NoPeakAbove reports whether perftest computes no peak for iters: it
// turns the peak off past 20000 iterations.
func NoPeakAbove(iters int) bool { return iters > peakMaxIters }

// BW computes a bandwidth report from the post and completion times of
// the messages (nanoseconds), as print_report_bw does with cycles: posted
// has one entry per message, completed one per message with the time of
// the completion that covered it (only every cqMod-th is filled). With
// noPeak, posted[0] and completed[0] are the start and the end.
func BW(posted, completed []int64, size uint64, iters, cqMod int, noPeak, gbits bool) BWReport {
	factor := float64(mbFactor)
	if gbits {
		factor = gbFactor
	}
	last := iters - 1
	if noPeak {
		last = 0
	}
	total := float64(completed[last] - posted[0])
	r := BWReport{Size: size, Iters: uint64(iters)}
	if total <= 0 {
		total = 1
	}
	r.BWAvg = float64(size) * float64(iters) * perSecond / (total * factor)
	r.MsgRate = float64(iters) * perSecond / (total * mppsDivisor)
	if noPeak {
		return r
	}
	// cycles_t is unsigned in C: an unset first completion time makes
	// the starting minimum huge, not negative.
	opt := int64(math.MaxInt64)
	if completed[0] >= posted[0] {
		opt = completed[0] - posted[0]
	}
	for i := 0; i < iters; i++ {
		for j := roundUp(i+1, cqMod) - 1; j < iters; j += cqMod {
			if t := (completed[j] - posted[i]) / int64(j-i+1); t < opt {
				opt = t
			}
		}
		if iters%cqMod != 0 {
			j := iters - 1
			if t := (completed[j] - posted[i]) / int64(j-i+1); t < opt {
				opt = t
			}
		}
	}
	if opt <= 0 {
		opt = 1
	}
	r.BWPeak = float64(size) * perSecond / (float64(opt) * factor)
	return r
}

func roundUp(v, a int) int {
	if v%a == 0 {
		return v
	}
	return a * (v/a + 1)
}

// WriteBW prints one report line (REPORT_FMT, or REPORT_FMT_EXT for
// Gb/s below 0.1).
func WriteBW(w io.Writer, r BWReport, gbits bool) {
	if gbits && r.BWAvg < 0.1 {
		fmt.Fprintf(w, bwFormatExt, r.Size, r.Iters, r.BWPeak, r.BWAvg, r.MsgRate)
		return
	}
	fmt.Fprintf(w, bwFormat, r.Size, r.Iters, r.BWPeak, r.BWAvg, r.MsgRate)
}

// LatStats are the columns of a latency report, in microseconds.
type LatStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

// Lat computes a latency report as print_report_lat does: the deltas
// between consecutive post times (nanoseconds; iters of them, so iters-1
// deltas), sorted, the two largest dropped, each divided by rttFactor (2
// for a ping-pong, 1 for a READ). deltas is scratch space of at least
// len(posted)-1 entries. At least 5 samples are needed (perftest's
// minimum).
func Lat(posted []int64, rttFactor int, deltas []int64) (LatStats, error) {
	n := len(posted) - 1
	if n < 4 || len(deltas) < n {
		return LatStats{}, fmt.Errorf("perftest: %d latency samples, at least 5 iterations needed", n+1)
	}
	d := deltas[:n]
	for i := range d {
		d[i] = posted[i+1] - posted[i]
	}
	slices.Sort(d)
	n -= latTail
	q := perMicro * float64(rttFactor)
	var median int64
	if (n-1)%2 != 0 {
		median = (d[n/2] + d[n/2-1]) / 2
	} else {
		median = d[n/2]
	}
	var sum float64
	for _, v := range d[:n] {
		sum += float64(v) / q
	}
	avg := sum / float64(n)
	var varSum float64
	for _, v := range d[:n] {
		// perftest squares in ints: the differences are truncated.
		t := int(avg - float64(v)/q)
		varSum += float64(t * t)
	}
	i99 := int(math.Ceil(float64(n) * 0.99))
	i999 := int(math.Ceil(float64(n) * 0.999))
	return LatStats{
		Min:     float64(d[0]) / q,
		Max:     float64(d[n]) / q,
		Typical: float64(median) / q,
		Avg:     avg,
		Stdev:   math.Sqrt(varSum / float64(n)),
		P99:     float64(d[i99]) / q,
		P999:    float64(d[i999]) / q,
	}, nil
}

// WriteLat prints one latency report line (REPORT_FMT_LAT).
func WriteLat(w io.Writer, size uint64, iters int, s LatStats) {
	fmt.Fprintf(w, latFormat, size, iters, s.Min, s.Max, s.Typical, s.Avg, s.Stdev, s.P99, s.P999)
}

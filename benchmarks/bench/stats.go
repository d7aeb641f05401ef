package bench

import (
	"slices"
	"sync/atomic"
	"time"
)

// Dist summarizes a sample of durations. Durations are in nanoseconds in
// JSON.
type Dist struct {
	N    int           `json:"n"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
}

// Summarize returns the distribution of d (which it sorts).
func Summarize(d []time.Duration) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Dist{
		N:    len(d),
		Mean: sum / time.Duration(len(d)),
		P50:  quantile(d, 0.50),
		P99:  quantile(d, 0.99),
		Max:  d[len(d)-1],
	}
}

// quantile returns the q-quantile of sorted d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}

// Jain returns Jain's fairness index of the per-contender counts x:
// (Σx)² / (n·Σx²), 1 when all got the same share, 1/n when one got all.
// It is 0 when nobody got anything.
func Jain(x []int64) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(x)) * sq)
}

// maxInt64 raises m to v if v is larger.
func maxInt64(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

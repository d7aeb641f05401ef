package bench_test

import (
	"math"
	"testing"
	"time"

	"github.com/relock-go/relock/benchmarks/bench"
)

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25},
		{[]int64{3, 1}, 0.8},
		{[]int64{0, 0}, 0},
	} {
		if got := bench.Jain(tc.counts); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Jain(%v): got %v, want %v", tc.counts, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := bench.Summarize(d)
	want := bench.Dist{N: 100, Mean: 50500 * time.Microsecond, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if got != want {
		t.Errorf("Summarize: got %+v, want %+v", got, want)
	}
	if got := bench.Summarize(nil); got != (bench.Dist{}) {
		t.Errorf("Summarize(nil): got %+v, want zero", got)
	}
}

// Package benchmarks_test holds relock's testing.B benchmarks, for
// comparing changes with benchstat:
//
//	go test -run '^$' -bench . -count 10 ./benchmarks/ > new.txt
//	benchstat old.txt new.txt
//
// They run on an embedded miniredis unless RELOCK_BENCH_REDIS names a real
// server (RELOCK_BENCH_REDIS=redis://127.0.0.1:6379); miniredis figures
// are not Redis figures. The relockbench command (benchmarks/cmd) runs the
// full scenarios and prints a report.
package benchmarks_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/mutex"
)

// server returns the server to benchmark against, closed at the end of b.
func server(b testing.TB) *bench.Server {
	b.Helper()
	var (
		srv *bench.Server
		err error
	)
	if url := os.Getenv("RELOCK_BENCH_REDIS"); url != "" {
		srv, err = bench.Dial(url)
	} else {
		srv, err = bench.StartMini()
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return srv
}

// short is a kind's name without the "relock/" prefix, for sub-benchmark
// names such as kind=mutex.
func short(k bench.Kind) string { return strings.TrimPrefix(k.Name, "relock/") }

// fail stops b if r reports an error, a stall or a violation.
func fail(b testing.TB, r bench.Result) {
	b.Helper()
	if r.Err != "" || r.Stalled || r.Violations > 0 {
		b.Fatalf("%s %s: err=%q stalled=%v violations=%d notes=%v", r.Kind, r.Label(), r.Err, r.Stalled, r.Violations, r.Notes)
	}
}

// BenchmarkLock measures Lock+Unlock by 1, 4 and 16 owners on one name
// with no critical section: ns/op is the time per acquisition, cmds/op
// the Redis commands per acquisition, p99-wait-ns the 99th percentile
// wait for the lock.
func BenchmarkLock(b *testing.B) {
	srv := server(b)
	for _, k := range bench.RelockKinds() {
		for _, c := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("kind=%s/clients=%d", short(k), c), func(b *testing.B) {
				cfg := bench.Config{Server: srv, Ops: b.N, OnStart: b.ResetTimer}
				r := bench.Contention(context.Background(), cfg, k, c)
				b.StopTimer()
				fail(b, r)
				b.ReportMetric(r.CmdsPerOp, "cmds/op")
				b.ReportMetric(r.TripsPerOp, "roundtrips/op")
				b.ReportMetric(float64(r.Latency.P99.Nanoseconds()), "p99-wait-ns")
			})
		}
	}
}

// BenchmarkUncontended measures one owner's Lock+Unlock beside the raw
// SET NX PX + DEL floor, interleaved: p50-ns is the cycle's median and
// floor-ratio the cycle's median over the floor's (ns/op, which would mix
// both, is not reported).
func BenchmarkUncontended(b *testing.B) {
	srv := server(b)
	for _, k := range bench.RelockKinds() {
		b.Run("kind="+short(k), func(b *testing.B) {
			cfg := bench.Config{Server: srv, Ops: b.N, OnStart: b.ResetTimer}
			r := bench.Uncontended(context.Background(), cfg, k)
			b.StopTimer()
			fail(b, r)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(r.Latency.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(r.Uncontended.RatioP50, "floor-ratio")
			b.ReportMetric(r.CmdsPerOp, "cmds/op")
		})
	}
}

// BenchmarkHandoff measures the time from a holder's Unlock call to a
// blocked waiter's Lock return (p50-ns, p99-ns), and its median over the
// pushed floor (PUBLISH, receive, SET NX) under the same idle holds.
func BenchmarkHandoff(b *testing.B) {
	srv := server(b)
	for _, k := range bench.RelockKinds() {
		b.Run("kind="+short(k), func(b *testing.B) {
			cfg := bench.Config{Server: srv, Ops: b.N, HandoffHold: 2 * time.Millisecond, OnStart: b.ResetTimer}
			r := bench.Handoff(context.Background(), cfg, k)
			b.StopTimer()
			fail(b, r)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(r.Latency.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(r.Latency.P99.Nanoseconds()), "p99-ns")
			b.ReportMetric(r.Handoff.RatioP50, "floor-ratio")
			b.ReportMetric(r.CmdsPerOp, "cmds/op")
		})
	}
}

// BenchmarkReadHeavy measures 9 readers and 1 writer on one name with no
// critical section, for kinds with a read side and the mutex baseline:
// ns/op is the time per acquisition (read or write).
func BenchmarkReadHeavy(b *testing.B) {
	srv := server(b)
	for _, k := range bench.RelockKinds() {
		if !k.Shared && !k.Baseline {
			continue
		}
		b.Run("kind="+short(k), func(b *testing.B) {
			cfg := bench.Config{Server: srv, Ops: b.N, OnStart: b.ResetTimer}
			r := bench.ReadHeavy(context.Background(), cfg, k)
			b.StopTimer()
			fail(b, r)
			b.ReportMetric(r.CmdsPerOp, "cmds/op")
			b.ReportMetric(r.ReadHeavy.MeanReaders, "readers-inside")
			b.ReportMetric(float64(r.ReadHeavy.WriteWait.P99.Nanoseconds()), "p99-write-wait-ns")
		})
	}
}

// BenchmarkObserver measures one owner's uncontended mutex Lock+Unlock
// with no observer, with an observer that does nothing, and with a logger
// that discards (events are built but not logged for a plain cycle):
// allocs/op shows what events cost and that, unobserved, they cost
// nothing.
//
//	go test -run '^$' -bench Observer -benchmem ./benchmarks/
func BenchmarkObserver(b *testing.B) {
	srv := server(b)
	for _, tc := range []struct {
		name string
		opts []relock.Option
	}{
		{"observer=none", nil},
		{"observer=noop", []relock.Option{relock.WithObserver(func(relock.Event) {})}},
		{"observer=logger", []relock.Option{relock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rdb := srv.NewRedis(nil)
			defer rdb.Close()
			c := relock.New(rdb, tc.opts...)
			defer c.Close()
			m := mutex.New(c, bench.UniqueName("observer"))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

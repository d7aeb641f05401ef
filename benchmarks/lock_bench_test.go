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

// kinds are relock's lock types that every scenario applies to (not those
// measured for their server cost only).
func kinds() []bench.Kind {
	var out []bench.Kind
	for _, k := range bench.RelockKinds() {
		if len(k.Only) == 0 {
			out = append(out, k)
		}
	}
	return out
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
	for _, k := range kinds() {
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
	for _, k := range kinds() {
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
	for _, k := range kinds() {
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

// BenchmarkHandoffContended measures the hand-off under sustained
// contention: 16 owners lock one name in a loop with a 1ms critical
// section; ns/op is the time per acquisition, p50-handoff-ns the median
// time from a release call to the next holder running.
func BenchmarkHandoffContended(b *testing.B) {
	srv := server(b)
	for _, k := range kinds() {
		b.Run(fmt.Sprintf("kind=%s/owners=16", short(k)), func(b *testing.B) {
			cfg := bench.Config{Server: srv, Ops: b.N, ContendedOwners: 16, OnStart: b.ResetTimer}
			r := bench.HandoffContended(context.Background(), cfg, k)
			b.StopTimer()
			fail(b, r)
			b.ReportMetric(float64(r.Latency.P50.Nanoseconds()), "p50-handoff-ns")
			b.ReportMetric(float64(r.Latency.P99.Nanoseconds()), "p99-handoff-ns")
			b.ReportMetric(r.CmdsPerOp, "cmds/op")
			if s := r.Contention.Server; s != nil {
				b.ReportMetric(s.UsPerOp, "server-us/op")
			}
		})
	}
}

// BenchmarkManyReaders measures a read/write lock held by 1, 100 and
// 1,000 readers: p50-read-ns is a probe's RLock+RUnlock, p50-write-ns its
// refused write attempt, and on a real server server-us/read-call and
// server-us/write-call the server's script time per call (ns/op, which
// would mix both, is not reported).
func BenchmarkManyReaders(b *testing.B) {
	srv := server(b)
	for _, k := range kinds() {
		if !k.Shared {
			continue
		}
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("kind=%s/readers=%d", short(k), n), func(b *testing.B) {
				cfg := bench.Config{Server: srv, Ops: b.N, OnStart: b.ResetTimer}
				r := bench.ManyReaders(context.Background(), cfg, k, n)
				b.StopTimer()
				fail(b, r)
				m := r.ManyReaders
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(m.ReadCycle.P50.Nanoseconds()), "p50-read-ns")
				b.ReportMetric(float64(m.WriteAttempt.P50.Nanoseconds()), "p50-write-ns")
				if m.Read != nil && m.Write != nil {
					b.ReportMetric(m.Read.UsPerCall, "server-us/read-call")
					b.ReportMetric(m.Write.UsPerCall, "server-us/write-call")
				}
			})
		}
	}
}

// BenchmarkManyWaiters measures a lock with 1 and 1,000 queued waiters
// (100 on miniredis): waiters+1 owners lock one name in a loop with no
// critical section. ns/op is the time per acquisition, p50-handoff-ns the
// median release-to-next-holder time, and on a real server
// server-us/call the server's script time per call.
func BenchmarkManyWaiters(b *testing.B) {
	srv := server(b)
	many := 1000
	if !srv.Real() {
		many = 100
	}
	for _, k := range kinds() {
		if !k.Queue {
			continue
		}
		for _, w := range []int{1, many} {
			b.Run(fmt.Sprintf("kind=%s/waiters=%d", short(k), w), func(b *testing.B) {
				// A queue of 100 on miniredis, which runs every waiter's
				// heartbeat too, can pause hand-offs for half a second.
				cfg := bench.Config{Server: srv, Ops: b.N, StallAfter: 5 * time.Second, OnStart: b.ResetTimer}
				r := bench.ManyWaiters(context.Background(), cfg, k, w)
				b.StopTimer()
				fail(b, r)
				b.ReportMetric(float64(r.Latency.P50.Nanoseconds()), "p50-handoff-ns")
				b.ReportMetric(r.CmdsPerOp, "cmds/op")
				if s := r.Contention.Server; s != nil {
					b.ReportMetric(s.UsPerCall, "server-us/call")
				}
			})
		}
	}
}

// BenchmarkManyLocks measures 64 goroutines locking names drawn at random
// out of 100,000, a new handle per cycle, beside SET NX PX + DEL by the
// same goroutines on the same client: cycles/s and floor-ratio (the
// cycles per second over the floor's; ns/op, which would mix both, is not
// reported).
func BenchmarkManyLocks(b *testing.B) {
	srv := server(b)
	for _, k := range kinds() {
		b.Run(fmt.Sprintf("kind=%s/goroutines=64", short(k)), func(b *testing.B) {
			cfg := bench.Config{Server: srv, Ops: b.N, LockWorkers: 64, LockNames: 100000, OnStart: b.ResetTimer}
			r := bench.ManyLocks(context.Background(), cfg, k)
			b.StopTimer()
			fail(b, r)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(r.OpsPerSec, "cycles/s")
			b.ReportMetric(r.ManyLocks.Ratio, "floor-ratio")
			b.ReportMetric(r.CmdsPerOp, "cmds/op")
		})
	}
}

// BenchmarkReadHeavy measures 9 readers and 1 writer on one name with no
// critical section, for kinds with a read side and the mutex baseline:
// ns/op is the time per acquisition (read or write).
func BenchmarkReadHeavy(b *testing.B) {
	srv := server(b)
	for _, k := range kinds() {
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

package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/benchmarks/bench"
)

func mini(t *testing.T) *bench.Server {
	t.Helper()
	srv, err := bench.StartMini()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// ok fails t unless r has figures and no error, stall or violation.
func ok(t *testing.T, r bench.Result) {
	t.Helper()
	if r.Err != "" || r.Stalled || r.Violations > 0 || r.Ops == 0 {
		t.Fatalf("%s %s: err=%q stalled=%v violations=%d ops=%d notes=%v", r.Kind, r.Label(), r.Err, r.Stalled, r.Violations, r.Ops, r.Notes)
	}
}

// TestScenarios runs every scenario briefly for every relock kind on
// miniredis, so that a change that breaks the benchmarks is caught by go
// test.
func TestScenarios(t *testing.T) {
	srv := mini(t)
	ctx := context.Background()
	cfg := bench.Config{
		Server: srv, Ops: 10, HandoffHold: 2 * time.Millisecond,
		WatchdogLocks: 20, WatchdogTimeout: 300 * time.Millisecond, WatchdogPeriods: 2,
	}
	var all []bench.Result
	for _, k := range bench.RelockKinds() {
		t.Run(k.Name, func(t *testing.T) {
			r := bench.Uncontended(ctx, cfg, k)
			ok(t, r)
			if got, want := r.CmdsPerOp, 2.0; got != want {
				t.Errorf("uncontended commands per cycle: got %v, want %v", got, want)
			}
			all = append(all, r)

			r = bench.Handoff(ctx, bench.Config{Server: srv, Ops: 3, HandoffHold: cfg.HandoffHold}, k)
			ok(t, r)
			if r.Latency.N != 3 || r.Handoff.Floor.N != 3 {
				t.Errorf("handoff samples: got %d (floor %d), want 3", r.Latency.N, r.Handoff.Floor.N)
			}
			all = append(all, r)

			r = bench.Contention(ctx, bench.Config{Server: srv, Ops: 40}, k, 4)
			ok(t, r)
			if r.Ops != 40 {
				t.Errorf("contention acquisitions: got %d, want 40", r.Ops)
			}
			all = append(all, r)

			if k.Shared || k.Baseline {
				r = bench.ReadHeavy(ctx, bench.Config{Server: srv, Ops: 40}, k)
				ok(t, r)
				if k.Shared != r.ReadHeavy.Shared {
					t.Errorf("read-heavy shared: got %v, want %v", r.ReadHeavy.Shared, k.Shared)
				}
				all = append(all, r)
			}

			r = bench.Watchdog(ctx, cfg, k)
			ok(t, r)
			if w := r.Watchdog; w.Lost != 0 || w.CmdsPerSec == 0 {
				t.Errorf("watchdog: %d holds lost, %v commands/s (want 0 lost, renewals seen)", w.Lost, w.CmdsPerSec)
			}
			all = append(all, r)
		})
	}

	bench.Evaluate(all)
	rep := &bench.Report{Results: all, Base: bench.KindMutex}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "relock/mutex") {
		t.Errorf("table lacks relock/mutex:\n%s", buf.String())
	}
	if err := rep.WriteSVG(io.Discard); err != nil {
		t.Fatal(err)
	}
}

// TestMainJSON runs the command line on miniredis and checks its JSON.
func TestMainJSON(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"-json", "-duration", "50ms", "-scenarios", "uncontended,contention", "-contenders", "2", "-kinds", bench.KindMutex}
	if code := bench.Main("relockbench", args, bench.RelockKinds(), &out, &errs); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs.String())
	}
	if !strings.Contains(errs.String(), "NOT Redis figures") {
		t.Errorf("stderr lacks the miniredis warning:\n%s", errs.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	if got, want := len(rep.Results), 2; got != want {
		t.Fatalf("results: got %d, want %d", got, want)
	}
	for _, r := range rep.Results {
		ok(t, r)
	}
}

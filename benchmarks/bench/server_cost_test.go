package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/internal/redistest"
)

// realServer starts a redis-server of t's own: the server-cost and
// request-record figures count everything the server does, so nothing
// else may use it meanwhile.
func realServer(t *testing.T) *bench.Server {
	t.Helper()
	s := redistest.StartServer(t)
	srv, err := bench.Dial("redis://" + s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func kind(t *testing.T, name string) bench.Kind {
	t.Helper()
	for _, k := range bench.RelockKinds() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return bench.Kind{}
}

// TestServerCostOnMiniredis: the scenario needs a real server, and says
// so.
func TestServerCostOnMiniredis(t *testing.T) {
	redistest.Parallel(t)
	r := bench.ServerCost(context.Background(), bench.Config{Server: mini(t), Ops: 5}, kind(t, bench.KindMutex), false)
	if !strings.Contains(r.Skipped, "-redis") {
		t.Errorf("server-cost on miniredis: skipped %q, want a reason that names -redis", r.Skipped)
	}
}

// TestServerCost measures the server cost of an uncontended cycle on a
// real redis-server: positive CPU on both sides, the floors' commands
// exactly as they are sent (the measurement's own INFO calls are not
// counted), relock's scripts seen and timed, a contended cycle for the
// exclusive side only, and the targets and the summary's column. Client
// CPU is the process's (getrusage): it runs alone.
func TestServerCost(t *testing.T) {
	redistest.Exclusive(t, "client CPU per cycle is the whole process's CPU time")
	srv := realServer(t)
	ctx := context.Background()
	cfg := bench.Config{Server: srv, Ops: 30}
	var all []bench.Result
	for _, tc := range []struct {
		kind string
		read bool
	}{{bench.KindMutex, false}, {bench.KindRWLock, false}, {bench.KindRWLock, true}, {bench.KindElection, false}} {
		t.Run(tc.kind+map[bool]string{true: "/read", false: ""}[tc.read], func(t *testing.T) {
			r := bench.ServerCost(ctx, cfg, kind(t, tc.kind), tc.read)
			ok(t, r)
			s := r.ServerCost
			if s == nil || s.Blocks != 3 || s.CyclesPerBlock != 30 {
				t.Fatalf("server cost: %+v, want 3 blocks of 30 cycles", s)
			}
			for what, c := range map[string]bench.Cost{"lock": s.Lock, "SET NX+DEL": s.Floor, "SET NX+CAD": s.ScriptFloor} {
				if c.ServerCPU <= 0 || c.ClientCPU <= 0 || c.Cycle <= 0 {
					t.Errorf("%s: Redis CPU %v, client CPU %v, cycle %v per cycle; want all > 0", what, c.ServerCPU, c.ClientCPU, c.Cycle)
				}
				// Two commands through go-redis allocate at least their
				// Cmds; waiting for a reply switches threads out.
				if c.Allocs < 2 || c.Switches <= 0 {
					t.Errorf("%s: %v heap objects, %v context switches per cycle; want >= 2, > 0", what, c.Allocs, c.Switches)
				}
			}
			if f := s.Floor; f.Commands != 2 || f.ServerCalls != 2 || f.ScriptCalls != 0 || f.ScriptTime != 0 {
				t.Errorf("SET NX+DEL per cycle: %v sent, %v run, %v scripts (%v); want 2, 2, 0 (0)", f.Commands, f.ServerCalls, f.ScriptCalls, f.ScriptTime)
			}
			if f := s.ScriptFloor; f.Commands != 2 || f.ServerCalls != 4 || f.ScriptCalls != 1 || f.ScriptTime <= 0 {
				t.Errorf("SET NX+CAD per cycle: %v sent, %v run, %v scripts (%v); want 2, 4 (GET and DEL inside), 1 (> 0)",
					f.Commands, f.ServerCalls, f.ScriptCalls, f.ScriptTime)
			}
			if l := s.Lock; l.Commands < 2 || l.ServerCalls < l.Commands || l.ScriptCalls < 1 || l.ScriptTime <= 0 {
				t.Errorf("%s per cycle: %v sent, %v run, %v scripts (%v); want >= 2 sent, as many run or more, a script timed",
					tc.kind, l.Commands, l.ServerCalls, l.ScriptCalls, l.ScriptTime)
			}
			// Where the time goes, command by command: the floors' exactly,
			// and for the lock as many calls as Redis ran, its scripts
			// aside, each timed.
			if got, want := calls(s.Floor.ByCommand), "del 1, set 1"; got != want {
				t.Errorf("SET NX+DEL's commands per cycle %q, want %q", got, want)
			}
			if got, want := calls(s.ScriptFloor.ByCommand), "del 1, get 1, set 1"; got != want {
				t.Errorf("SET NX+CAD's commands per cycle %q (the script's aside), want %q", got, want)
			}
			// Redis times each call in whole microseconds, so a command
			// that takes less (an HDEL of a small hash) can read 0 in
			// every block; together the calls cannot.
			var n float64
			var took time.Duration
			for name, c := range s.Lock.ByCommand {
				n += c.Calls
				took += c.Time
				if c.Calls <= 0 || c.Time < 0 {
					t.Errorf("%s: %v calls of %s per cycle took %v", tc.kind, c.Calls, name, c.Time)
				}
			}
			if took <= 0 {
				t.Errorf("%s: the %v calls per cycle by command took no time", tc.kind, n)
			}
			// (Medians per command against a median of their sum: close.)
			if l := s.Lock; math.Abs(n-(l.ServerCalls-l.ScriptCalls)) > max(0.1, 0.05*l.ServerCalls) {
				t.Errorf("%s: %v calls per cycle by command, want the %v run less the %v scripts", tc.kind, n, l.ServerCalls, l.ScriptCalls)
			}
			if got, want := r.CmdsPerOp, s.Lock.Commands; got != want {
				t.Errorf("commands per op %v, want the lock's %v", got, want)
			}
			switch c := s.Contended; {
			case tc.read && c != nil:
				t.Errorf("read side measured contended: %+v", c)
			// An acquisition is an attempt and a release, two commands, a
			// waiter whose Client is subscribed already included (the
			// window of a short run can end between the two: 60 in 31).
			case !tc.read && (c == nil || c.Acquisitions < 30 || c.Cost.Commands < 1.8 || c.Cost.ServerCPU <= 0 || c.Cost.ServerCalls < c.Cost.Commands):
				t.Errorf("contended: %+v; want >= 30 acquisitions, >= 1.8 commands each, Redis CPU, as many commands run as sent or more", c)
			}
			all = append(all, r)
		})
	}

	bench.Evaluate(all)
	for _, r := range all {
		var targets []string
		for _, c := range r.Targets {
			targets = append(targets, c.Target)
		}
		got := strings.Join(targets, "; ")
		if r.Kind == bench.KindElection {
			if got != "" {
				t.Errorf("%s held to targets: %s", r.Kind, got)
			}
			continue
		}
		for _, want := range []string{"Redis CPU per uncontended cycle at most 1.", "time inside scripts per uncontended cycle at most",
			"client CPU per uncontended cycle at most 1.3x"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s %s: targets %q lack %q", r.Kind, r.Label(), got, want)
			}
		}
		if want := "at most 3.5 commands per acquisition"; strings.Contains(got, want) == r.Read {
			t.Errorf("%s %s: targets %q; want %q for the exclusive side only", r.Kind, r.Label(), got, want)
		}
	}
	rep := &bench.Report{Meta: bench.Meta{RealRedis: true, LockWorkers: 64, LockNames: 100000}, Results: all}
	var out bytes.Buffer
	if err := rep.WriteText(&out, bench.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "REDIS CPU") || !strings.Contains(out.String(), "read side: Redis CPU") {
		t.Errorf("summary lacks the REDIS CPU column or the read side:\n%s", out.String())
	}
	if line, n := widest(out.String()); n > 80 {
		t.Errorf("summary line of %d columns, want at most 80:\n%s", n, line)
	}
	out.Reset()
	if err := rep.WriteText(&out, bench.TextOptions{Full: true, Targets: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Redis's time per cycle in each command (inside scripts or not): ", "; SET NX+CAD's: ",
		"Redis's time per cycle in each command: "} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), want) {
			t.Errorf("the full report with targets lacks %q:\n%s", want, out.String())
		}
	}
}

// calls lists the commands of a Cost.ByCommand with their calls per
// cycle, by name: "del 1, set 1".
func calls(m map[string]bench.CommandCost) string {
	var out []string
	for name, c := range m {
		out = append(out, fmt.Sprintf("%s %g", name, c.Calls))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestRequestRecords measures the keys that cycles of new handles leave on
// a real redis-server (the redis-memory scenario): counted right after,
// after a short wait and after the client's Close, and, when keys are
// left, what they hold while owners cycle at a steady rate.
func TestRequestRecords(t *testing.T) {
	redistest.Parallel(t)
	srv := realServer(t)
	cfg := bench.Config{Server: srv, MemoryLocks: 50, MemoryWaiters: 10, RecordRate: 2000}
	r := bench.Memory(context.Background(), cfg, kind(t, bench.KindMutex))
	ok(t, r)
	rec := r.Memory.Records
	if rec == nil {
		t.Fatal("no request records measured")
	}
	if rec.Cycles != 50 || rec.Wait <= 0 || rec.TargetRate != 2000 {
		t.Errorf("records: %d cycles, wait %v, target rate %v; want 50, > 0, 2000", rec.Cycles, rec.Wait, rec.TargetRate)
	}
	if rec.LeftAfterClose > rec.LeftAfter+rec.LeftAfterWait || rec.LeftAfter > 2*int64(rec.Cycles) {
		t.Errorf("records: %d keys right after, %d after the wait, %d after Close: more than the cycles left",
			rec.LeftAfter, rec.LeftAfterWait, rec.LeftAfterClose)
	}
	if rec.LeftAfter > 0 || rec.LeftAfterWait > 0 {
		if rec.Rate <= 0 || rec.Rate > 1.2*rec.TargetRate || rec.Window <= 0 || rec.Keys <= 0 && rec.LeftAfterWait > 0 {
			t.Errorf("records at a steady rate: %v cycles/s (at most %v) for %v, %d keys; want a measurement",
				rec.Rate, rec.TargetRate, rec.Window, rec.Keys)
		}
		if rec.LeftAfterWait > 0 && (rec.SteadyMeasured || rec.Steady <= 0 || rec.TTL <= 0) {
			t.Errorf("records outlive the wait: steady state %v (measured %v), TTL %v; want computed from the TTL", rec.Steady, rec.SteadyMeasured, rec.TTL)
		}
	}
	evaluated := []bench.Result{r}
	bench.Evaluate(evaluated)
	r = evaluated[0]
	var leaves, holds *bench.Check
	for i, c := range r.Targets {
		switch {
		case c.Target == "an uncontended cycle leaves no key behind":
			leaves = &r.Targets[i]
		case strings.HasPrefix(c.Target, "request records at 2,000 cycles/s"):
			holds = &r.Targets[i]
		}
	}
	if leaves == nil || holds == nil {
		t.Fatalf("targets %+v lack the request records' two", r.Targets)
	}
	if got, want := leaves.Met, rec.LeftAfterWait == 0 && rec.LeftAfterClose == 0; got != want {
		t.Errorf("target %q met %v, want %v (%s)", leaves.Target, got, want, leaves.Detail)
	}
}

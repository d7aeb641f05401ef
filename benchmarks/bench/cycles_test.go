package bench_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/internal/redistest"
)

// lockCalls counts a kind's Lock, Unlock, RLock and RUnlock calls.
type lockCalls struct{ lock, unlock, rlock, runlock atomic.Int64 }

// total is how many calls c counted.
func (c *lockCalls) total() int64 {
	return c.lock.Load() + c.unlock.Load() + c.rlock.Load() + c.runlock.Load()
}

// counting returns k with every handle's calls counted in c.
func counting(k bench.Kind, c *lockCalls) bench.Kind {
	open := k.Open
	k.Open = func(srv *bench.Server, cnt *bench.Counter, o bench.OpenOptions) (bench.Conn, error) {
		conn, err := open(srv, cnt, o)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, c}, nil
	}
	return k
}

type countingConn struct {
	bench.Conn
	c *lockCalls
}

func (cc countingConn) New(name string) bench.Locker {
	l := cc.Conn.New(name)
	x := countedLocker{lock: tally(&cc.c.lock, l.Lock), unlock: tally(&cc.c.unlock, l.Unlock)}
	if rl, ok := l.(bench.RLocker); ok {
		return countedRLocker{x, tally(&cc.c.rlock, rl.RLock), tally(&cc.c.runlock, rl.RUnlock)}
	}
	return x
}

// tally returns f, counting its calls in n.
func tally(n *atomic.Int64, f func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		n.Add(1)
		return f(ctx)
	}
}

type countedLocker struct{ lock, unlock func(context.Context) error }

func (x countedLocker) Lock(ctx context.Context) error   { return x.lock(ctx) }
func (x countedLocker) Unlock(ctx context.Context) error { return x.unlock(ctx) }

type countedRLocker struct {
	countedLocker
	rlock, runlock func(context.Context) error
}

func (x countedRLocker) RLock(ctx context.Context) error   { return x.rlock(ctx) }
func (x countedRLocker) RUnlock(ctx context.Context) error { return x.runlock(ctx) }

// TestCycles: Cycles runs n cycles of each kind's handle (of its read
// side with read), says so line by line, and leaves no key behind (the
// request records are deleted when the kind's Client closes), on
// miniredis and on a real server.
func TestCycles(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		var srv *bench.Server
		if s.Mini != nil {
			srv = mini(t)
		} else {
			var err error
			if srv, err = bench.Dial("redis://" + s.Addr); err != nil {
				t.Fatal(err)
			}
		}
		var mc, rc lockCalls
		kinds := []bench.Kind{counting(kind(t, bench.KindMutex), &mc), counting(kind(t, bench.KindRWLock), &rc)}
		var out bytes.Buffer
		ctx := context.Background()
		if err := bench.Cycles(ctx, srv, kinds, []string{bench.FloorDel, bench.FloorCAD}, 3, false, &out); err != nil {
			t.Fatal(err)
		}
		if err := bench.Cycles(ctx, srv, kinds[1:], nil, 2, true, &out); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what      string
			got, want int64
		}{
			{"mutex Lock", mc.lock.Load(), 3}, {"mutex Unlock", mc.unlock.Load(), 3},
			{"rwlock Lock", rc.lock.Load(), 3}, {"rwlock Unlock", rc.unlock.Load(), 3},
			{"rwlock RLock", rc.rlock.Load(), 2}, {"rwlock RUnlock", rc.runlock.Load(), 2},
		} {
			if c.got != c.want {
				t.Errorf("%s called %d times, want %d", c.what, c.got, c.want)
			}
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		want := []string{
			"relock/mutex: 3 cycles in ", "relock/rwlock: 3 cycles in ",
			"floor/set-nx+del: 3 cycles in ", "floor/set-nx+cad: 3 cycles in ",
			"relock/rwlock read: 2 cycles in ",
		}
		if len(lines) != len(want) {
			t.Fatalf("output:\n%s\nwant %d lines", out.String(), len(want))
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d: %q, want it to start with %q", i, lines[i], w)
			}
		}
		var keys []string
		if s.Mini != nil {
			keys = srv.Mini.Keys()
		} else {
			keys = s.Keys(t, "*{cycles}*")
		}
		if len(keys) != 0 {
			t.Errorf("keys left behind: %v", keys)
		}

		// A read side that a kind or a floor lacks, or an unknown floor,
		// is refused before anything runs.
		calls, written := mc.total()+rc.total(), out.Len()
		err := bench.Cycles(ctx, srv, []bench.Kind{kinds[1], kinds[0]}, nil, 1, true, &out) // the rwlock first
		if !errors.Is(err, bench.ErrNoReadSide) || !strings.Contains(err.Error(), bench.KindMutex) {
			t.Errorf("read cycles of a mutex: %v, want ErrNoReadSide naming %s", err, bench.KindMutex)
		}
		err = bench.Cycles(ctx, srv, kinds[1:], []string{bench.FloorCAD}, 1, true, &out)
		if !errors.Is(err, bench.ErrNoReadSide) {
			t.Errorf("read cycles of a floor: %v, want ErrNoReadSide", err)
		}
		if err := bench.Cycles(ctx, srv, nil, []string{"floor/other"}, 1, false, &out); err == nil || !strings.Contains(err.Error(), "unknown floor") {
			t.Errorf("an unknown floor: %v, want an error that says so", err)
		}
		if got := mc.total() + rc.total() - calls; got != 0 || out.Len() != written {
			t.Errorf("refused runs made %d calls and wrote %q", got, out.String()[written:])
		}
	})
}

// TestCyclesFloors: each floor runs the commands it is named after, n
// times (counted by the real server's INFO commandstats, the script's
// inner commands included).
func TestCyclesFloors(t *testing.T) {
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		srv, err := bench.Dial("redis://" + s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		admin := s.Client(t)
		count := func(floor string) map[string]int64 {
			cmds := []string{"set", "del", "get", "evalsha", "eval"}
			before := map[string]int64{}
			for _, c := range cmds {
				before[c] = redistest.CommandCalls(t, admin, c)
			}
			var out bytes.Buffer
			if err := bench.Cycles(context.Background(), srv, nil, []string{floor}, 4, false, &out); err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, c := range cmds {
				got[c] = redistest.CommandCalls(t, admin, c) - before[c]
			}
			return got
		}
		if got := count(bench.FloorDel); got["set"] != 4 || got["del"] != 4 || got["get"] != 0 || got["evalsha"]+got["eval"] != 0 {
			t.Errorf("%s ran %v, want 4 SETs and 4 DELs, nothing else", bench.FloorDel, got)
		}
		// The script is not loaded yet: go-redis's first EVALSHA fails
		// and it sends EVAL, once.
		if got := count(bench.FloorCAD); got["set"] != 4 || got["del"] != 4 || got["get"] != 4 || got["evalsha"] != 4 || got["eval"] != 1 {
			t.Errorf("%s ran %v, want 4 SETs, 4 EVALSHAs (one refused, then an EVAL) and the script's 4 GETs and 4 DELs", bench.FloorCAD, got)
		}
	})
}

// TestCyclesFlags: -cycles takes only -redis, -kinds (which selects the
// floors by prefix too) and -cycles-read; any other flag, a bad count, a
// missing -redis or a read side that a kind lacks is a usage error that
// runs nothing.
func TestCyclesFlags(t *testing.T) {
	redistest.Parallel(t)
	url := "redis://" + redistest.Real(t).Addr
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := bench.Main("relockbench", args, bench.RelockKinds(), &out, &errs)
		return code, out.String(), errs.String()
	}
	code, out, errs := run("-redis", url, "-cycles", "2", "-kinds", "floor/set-nx+c,relock/fair")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	if !strings.HasPrefix(out, "relock/fair: 2 cycles in ") || !strings.Contains(out, "\nfloor/set-nx+cad: 2 cycles in ") ||
		strings.Contains(out, "set-nx+del") || strings.Count(out, "\n") != 2 {
		t.Errorf("stdout:\n%s\nwant relock/fair's and floor/set-nx+cad's lines only", out)
	}
	code, out, errs = run("-redis", url, "-cycles", "2", "-kinds", "relock/rwlock", "-cycles-read")
	if code != 0 || !strings.HasPrefix(out, "relock/rwlock read: 2 cycles in ") {
		t.Errorf("-cycles-read: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-redis", url, "-cycles", "0"}, "bad -cycles value 0"},
		{[]string{"-redis", url, "-cycles", "-1", "-kinds", "floor"}, "bad -cycles value -1"},
		{[]string{"-cycles", "2", "-kinds", "floor"}, "needs -redis"},
		{[]string{"-redis", url, "-cycles", "2", "-kinds", "relock/rwlock,relock/semaphore", "-cycles-read"}, "relock/semaphore: no read side"},
		{[]string{"-redis", url, "-cycles", "2", "-cycles-read"}, "no read side"},
		{[]string{"-redis", url, "-cycles-read"}, "-cycles-read needs -cycles"},
		{[]string{"-redis", url, "-cycles", "2", "-kinds", "nothing"}, "no kind or floor matches"},
		{[]string{"-redis", url, "-cycles", "2", "-json", "-scenarios", "uncontended"}, "not -json -scenarios"},
		{[]string{"-redis", url, "-cycles", "2", "-from-json", "x.json"}, "not -from-json"},
		{[]string{"-redis", url, "-cycles", "2", "-cluster", "127.0.0.1:1"}, "not -cluster"},
	} {
		code, out, errs := run(tc.args...)
		if code != 1 || out != "" || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, no output, an error with %q", tc.args, code, out, errs, tc.err)
		}
	}
}

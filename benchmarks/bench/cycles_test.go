package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/internal/redistest"
)

// TestCycles: -cycles runs each kind's cycles and each floor's, says so
// line by line, and leaves no key behind (the request records are
// deleted when the kind's Client closes), on miniredis and on a real
// server.
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
		kinds := []bench.Kind{kind(t, bench.KindMutex), kind(t, bench.KindRWLock)}
		var out bytes.Buffer
		if err := bench.Cycles(context.Background(), srv, kinds, bench.CycleFloors, 3, false, &out); err != nil {
			t.Fatal(err)
		}
		if err := bench.Cycles(context.Background(), srv, kinds[1:], nil, 2, true, &out); err != nil {
			t.Fatal(err)
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
	})
}

// TestCyclesFlags: -kinds selects the floors by prefix too; a bad count,
// or -cycles-read for a kind without a read side, is a usage error that
// runs nothing.
func TestCyclesFlags(t *testing.T) {
	redistest.Parallel(t)
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := bench.Main("relockbench", args, bench.RelockKinds(), &out, &errs)
		return code, out.String(), errs.String()
	}
	code, out, errs := run("-cycles", "2", "-kinds", "floor/set-nx+c,relock/fair")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	if !strings.HasPrefix(out, "relock/fair: 2 cycles in ") || !strings.Contains(out, "\nfloor/set-nx+cad: 2 cycles in ") ||
		strings.Contains(out, "set-nx+del") || strings.Count(out, "\n") != 2 {
		t.Errorf("stdout:\n%s\nwant relock/fair's and floor/set-nx+cad's lines only", out)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-cycles", "0"}, "bad -cycles value 0"},
		{[]string{"-cycles", "-1", "-kinds", "floor"}, "bad -cycles value -1"},
		{[]string{"-cycles", "2", "-kinds", "relock/mutex", "-cycles-read"}, "no read side"},
		{[]string{"-cycles", "2", "-kinds", "nothing"}, "no kind matches"},
	} {
		code, out, errs := run(tc.args...)
		if code != 1 || out != "" || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, no output, an error with %q", tc.args, code, out, errs, tc.err)
		}
	}
}

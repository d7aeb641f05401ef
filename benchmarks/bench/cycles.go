package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"time"
)

// Names of the floors that -cycles runs beside the kinds: SET NX PX +
// DEL, and SET NX PX + a compare-and-delete script (EVALSHA), as the
// uncontended and server-cost scenarios measure them.
const (
	FloorDel = "floor/set-nx+del"
	FloorCAD = "floor/set-nx+cad"
)

// cycleFloors are the floors' names, in the order -cycles runs them.
var cycleFloors = []string{FloorDel, FloorCAD}

// cyclesName is the lock that -cycles locks: one fixed name, so that two
// runs of different lengths send the server the same keys.
const cyclesName = "cycles"

// ErrNoReadSide is Cycles' error for a kind or floor without a read side
// given with read.
var ErrNoReadSide = errors.New("no read side")

// Cycles measures nothing: it runs n uncontended Lock+Unlock cycles
// (RLock+RUnlock with read) of each kind on one handle of a Conn of its
// own, then n cycles of each floor named in floors (FloorDel, FloorCAD)
// on a go-redis client of its own, in that order, and writes one line
// per kind or floor to w: its name (with " read" for a read side), n and
// the time taken. It is for a profiler that watches the server from
// outside: the server's work for a cycle is the work of a run of 3,000
// cycles less that of a run of 1,000 (the connections, the scripts'
// loading and the Client's start and Close cancel out), over 2,000
// (benchmarks/instructions.sh does it with callgrind). A Conn is closed
// before the next kind starts, so a kind's background work (the deletes
// of its request records) falls within its own run.
//
// With read, every kind must have a read side and floors must be empty
// (an error matching ErrNoReadSide, before any cycle runs otherwise).
// The first cycle that fails (Redis unreachable: go-redis's dial or read
// error, after its retries) ends the run with that error, naming the
// kind or floor; the kind's Conn is closed first.
func Cycles(ctx context.Context, srv *Server, kinds []Kind, floors []string, n int, read bool, w io.Writer) error {
	if n < 1 {
		return fmt.Errorf("cycles: n must be at least 1, got %d", n)
	}
	for _, f := range floors {
		if !slices.Contains(cycleFloors, f) {
			return fmt.Errorf("cycles: unknown floor %q (have %s)", f, strings.Join(cycleFloors, ", "))
		}
		if read {
			return fmt.Errorf("cycles: %s: %w", f, ErrNoReadSide)
		}
	}
	for _, k := range kinds {
		if read && !k.Shared {
			return fmt.Errorf("cycles: %s: %w", k.Name, ErrNoReadSide)
		}
	}
	for _, k := range kinds {
		if err := kindCycles(ctx, srv, k, n, read, w); err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
	}
	for _, f := range floors {
		if err := floorRun(ctx, srv, f, n, w); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// kindCycles runs n cycles of k (its read side with read).
func kindCycles(ctx context.Context, srv *Server, k Kind, n int, read bool, w io.Writer) error {
	conn, err := k.Open(srv, &Counter{}, OpenOptions{})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	l := conn.New(cyclesName)
	name := k.Name
	if read {
		rl, ok := l.(RLocker)
		if !ok {
			_ = conn.Close()
			return ErrNoReadSide
		}
		l, name = rlockAsLock{rl}, name+" read"
	}
	d, err := timeCycles(n, func() error {
		if err := l.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	})
	if cerr := conn.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return err
	}
	return ranCycles(w, name, n, d)
}

// floorRun runs n cycles of the floor called name.
func floorRun(ctx context.Context, srv *Server, name string, n int, w io.Writer) error {
	rdb := srv.NewRedis(&Counter{})
	defer rdb.Close()
	del, cad := floorCycles(ctx, rdb, cyclesName)
	cycle := del
	if name == FloorCAD {
		cycle = cad
	}
	d, err := timeCycles(n, cycle)
	if err != nil {
		return err
	}
	return ranCycles(w, name, n, d)
}

// timeCycles calls cycle n times, and returns how long that took or the
// first error.
func timeCycles(n int, cycle func() error) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := cycle(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// ranCycles writes the line that says n cycles of name ran in d.
func ranCycles(w io.Writer, name string, n int, d time.Duration) error {
	_, err := fmt.Fprintf(w, "%s: %d cycles in %v\n", name, n, d.Round(time.Millisecond))
	return err
}

// cyclesArgs are the command line's flags for -cycles.
type cyclesArgs struct {
	set   map[string]bool // the flags given
	url   string          // -redis
	kinds string          // -kinds
	n     int             // -cycles
	read  bool            // -cycles-read
}

// cyclesFlags are the only flags that -cycles takes: it measures nothing,
// so the flags that shape a measurement or its report would be dropped
// without a word, and -cluster and -redlock would add kinds on other
// servers than the one a profiler watches.
var cyclesFlags = []string{"redis", "kinds", "cycles", "cycles-read"}

// cyclesMain is Main for -cycles: it checks a.set's flags, runs Cycles
// on the -redis server and returns the exit status.
func cyclesMain(a cyclesArgs, kinds []Kind, stdout io.Writer, fail func(string, ...any) int) int {
	var others []string
	for f := range a.set {
		if !slices.Contains(cyclesFlags, f) {
			others = append(others, "-"+f)
		}
	}
	sort.Strings(others)
	switch {
	case len(others) > 0:
		return fail("-cycles measures nothing and takes only -redis, -kinds and -cycles-read, not %s", strings.Join(others, " "))
	case !a.set["cycles"]:
		return fail("-cycles-read needs -cycles")
	case a.n < 1:
		return fail("bad -cycles value %d: want at least 1", a.n)
	case a.url == "":
		return fail("-cycles needs -redis URL: the profiler it serves watches a server outside this process")
	}
	sel := selectKinds(kinds, a.kinds)
	floors := selectNamed(cycleFloors, a.kinds, func(f string) string { return f })
	if len(sel) == 0 && len(floors) == 0 {
		return fail("no kind or floor matches -kinds %q", a.kinds)
	}
	srv, err := Dial(a.url)
	if err != nil {
		return fail("%v", err)
	}
	defer srv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Cycles(ctx, srv, sel, floors, a.n, a.read, stdout); err != nil {
		return fail("%v", err)
	}
	return 0
}

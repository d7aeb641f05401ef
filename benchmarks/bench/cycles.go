package bench

import (
	"context"
	"fmt"
	"io"
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

// CycleFloors are the floors' names, in the order -cycles runs them.
var CycleFloors = []string{FloorDel, FloorCAD}

// cyclesName is the lock that -cycles locks: one fixed name, so that two
// runs of different lengths send the server the same keys.
const cyclesName = "cycles"

// Cycles measures nothing: it runs n uncontended Lock+Unlock cycles
// (RLock+RUnlock with read) of each kind on one handle of a Conn of its
// own, then n cycles of each floor named in floors (FloorDel, FloorCAD)
// on a go-redis client of its own, in that order, and writes one line
// per kind or floor to w: its name, n and the time taken. It is for a
// profiler that watches the server from outside: the server's work for
// a cycle is the work of a run of 3,000 cycles less that of a run of
// 1,000 (the connections, the scripts' loading and the Client's start
// and Close cancel out), over 2,000 (benchmarks/instructions.sh does it
// with callgrind). A Conn is closed before the next kind starts, so a
// kind's background work (the deletes of its request records) falls
// within its own run.
func Cycles(ctx context.Context, srv *Server, kinds []Kind, floors []string, n int, read bool, w io.Writer) error {
	if n < 1 {
		return fmt.Errorf("cycles: n must be at least 1, got %d", n)
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
			return fmt.Errorf("no read side (-cycles-read)")
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
	_, err = fmt.Fprintf(w, "%s: %d cycles in %v\n", name, n, d.Round(time.Millisecond))
	return err
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
	_, err = fmt.Fprintf(w, "%s: %d cycles in %v\n", name, n, d.Round(time.Millisecond))
	return err
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

// selectFloors returns the floors whose name starts with one of the
// comma-separated prefixes in list, or all of them for an empty list (as
// selectKinds does for kinds).
func selectFloors(list string) []string {
	prefixes := splitList(list)
	if len(prefixes) == 0 {
		return CycleFloors
	}
	var out []string
	for _, f := range CycleFloors {
		for _, p := range prefixes {
			if strings.HasPrefix(f, p) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

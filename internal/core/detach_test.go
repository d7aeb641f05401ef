package core

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestDetach: a detached context keeps the caller's values, outlives the
// caller's cancellation (its Cause is not the caller's), and its Deadline
// is at most ReleaseTimeout from the call, at least ReleaseTimeout less
// detachSlot.
func TestDetach(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "trace"))
	before := time.Now()
	ctx := Detach(parent)
	after := time.Now()
	cancel(errors.New("the caller went away"))

	if got := ctx.Value(key{}); got != "trace" {
		t.Errorf("Value = %v, want the caller's", got)
	}
	if ctx.Err() != nil || context.Cause(ctx) != nil {
		t.Errorf("Err %v, Cause %v after the caller's cancellation; want nil", ctx.Err(), context.Cause(ctx))
	}
	select {
	case <-ctx.Done():
		t.Error("done with the caller")
	default:
	}
	at, ok := ctx.Deadline()
	if !ok || at.Before(before.Add(ReleaseTimeout-detachSlot)) || at.After(after.Add(ReleaseTimeout)) {
		t.Errorf("Deadline %v from now (%v); want at most ReleaseTimeout, at least %v less", time.Until(at), ok, detachSlot)
	}
}

// TestDeadlinesEnd: a detached context is done at its deadline, not
// before, with context.DeadlineExceeded; contexts
// detached in a burst share a deadline (one timer, not one each), from
// several goroutines too; a deadline is never nearer than after-slot nor
// further than after.
func TestDeadlinesEnd(t *testing.T) {
	d := &deadlines{after: 300 * time.Millisecond, slot: 100 * time.Millisecond}
	var mu sync.Mutex
	seen := map[time.Time]bool{}
	var ctxs []context.Context
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				before := time.Now()
				ctx := d.detach(context.Background())
				at, _ := ctx.Deadline()
				if at.Before(before.Add(d.after-d.slot)) || at.After(time.Now().Add(d.after)) {
					t.Errorf("deadline %v from the call, want %v to %v", at.Sub(before), d.after-d.slot, d.after)
				}
				mu.Lock()
				seen[at] = true
				ctxs = append(ctxs, ctx)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A new deadline is made at most once per slot: a stalled burst may
	// have needed more than one.
	if most := 1 + int(time.Since(start)/d.slot); len(seen) > most {
		t.Errorf("1000 contexts detached in %v have %d deadlines, want at most %d", time.Since(start), len(seen), most)
	}
	// One bound for all (a loaded machine may stall a second or more):
	// what is tested is that each ends, with the right error.
	limit := time.After(10 * time.Second)
	for _, ctx := range ctxs {
		at, _ := ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-limit:
			t.Fatal("not done 10 s after the deadlines")
		}
		if now := time.Now(); now.Before(at) {
			t.Fatalf("done %v before its deadline", at.Sub(now))
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("Err %v, Cause %v; want context.DeadlineExceeded", ctx.Err(), context.Cause(ctx))
		}
	}
	// Made once the shared deadline has passed: a new one.
	before := time.Now()
	ctx := d.detach(context.Background())
	if at, _ := ctx.Deadline(); at.Before(before.Add(d.after - d.slot)) {
		t.Errorf("a later context's deadline %v from the call, want at least %v", at.Sub(before), d.after-d.slot)
	}
}

// TestDetachedChildren: contexts derived from a detached context start no
// goroutine each (they learn of its end through its AfterFunc), and end
// with it, with its error; a function registered by context.AfterFunc and
// stopped in time is not run.
func TestDetachedChildren(t *testing.T) {
	d := &deadlines{after: 200 * time.Millisecond, slot: 50 * time.Millisecond}
	parent := d.detach(context.Background())
	before := runtime.NumGoroutine()
	var children []context.Context
	for range 100 {
		c, cancel := context.WithCancel(parent)
		t.Cleanup(cancel)
		children = append(children, c)
		c, cancel = context.WithTimeout(parent, time.Hour)
		t.Cleanup(cancel)
		children = append(children, c)
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Errorf("200 contexts derived from a detached one started %d goroutines", n)
	}
	ran := make(chan string, 2)
	stop := context.AfterFunc(parent, func() { ran <- "stopped" })
	context.AfterFunc(parent, func() { ran <- "kept" })
	if !stop() {
		t.Error("an AfterFunc could not be stopped before the deadline")
	}
	limit := time.After(10 * time.Second)
	for _, c := range children {
		select {
		case <-c.Done():
		case <-limit:
			t.Fatal("a derived context outlived the detached one by 10 s")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("a derived context ended with %v, want context.DeadlineExceeded", c.Err())
		}
	}
	select {
	case f := <-ran:
		if f != "kept" {
			t.Fatalf("the AfterFunc %q ran", f)
		}
	case <-limit:
		t.Fatal("an AfterFunc did not run at the deadline")
	}
	time.Sleep(10 * time.Millisecond)
	if len(ran) > 0 {
		t.Errorf("the AfterFunc %q ran", <-ran)
	}
}

// TestDeadlinesWithoutMonotonic: a time without a monotonic reading (a
// testing/synctest bubble's clock) gets a deadline of its own, exactly
// after from it, and is not shared with the calls that follow.
func TestDeadlinesWithoutMonotonic(t *testing.T) {
	d := &deadlines{after: time.Hour, slot: time.Minute}
	shared := d.get(time.Now())
	fake := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	own := d.get(fake)
	if own == shared || !own.at().Equal(fake.Add(d.after)) {
		t.Errorf("a fake clock's deadline is %v, want %v of its own", own.at(), fake.Add(d.after))
	}
	if d.cur.Load() != shared || d.get(time.Now()) != shared {
		t.Error("a fake clock's deadline replaced the shared one")
	}
	if d.get(fake) == own {
		t.Error("two fake-clock calls share a deadline")
	}
}

package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDetach: a detached context keeps the caller's values, outlives the
// caller's cancellation (its Cause is not the caller's), and ends with
// context.DeadlineExceeded at its Deadline, which is ReleaseTimeout from
// the call, at most detachSlot more.
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
	if !ok || at.Before(before.Add(ReleaseTimeout)) || at.After(after.Add(ReleaseTimeout+detachSlot)) {
		t.Errorf("Deadline %v (%v); want ReleaseTimeout from the call, at most %v more", time.Until(at), ok, detachSlot)
	}
}

// TestDeadlinesEnd: a detached context is done at its deadline, not
// before, with context.DeadlineExceeded; contexts detached in a burst
// share a deadline (one timer, not one each), which is never nearer than
// after.
func TestDeadlinesEnd(t *testing.T) {
	d := &deadlines{after: 60 * time.Millisecond, slot: 40 * time.Millisecond}
	seen := map[time.Time]bool{}
	var ctxs []context.Context
	for range 1000 {
		now := time.Now()
		ctx := d.detach(context.Background())
		at, _ := ctx.Deadline()
		if at.Before(now.Add(d.after)) {
			t.Fatalf("deadline %v from now, want at least %v", at.Sub(now), d.after)
		}
		seen[at] = true
		ctxs = append(ctxs, ctx)
	}
	if len(seen) > 3 {
		t.Errorf("1000 contexts detached in a burst have %d deadlines, want at most 3 (one per slot)", len(seen))
	}
	for _, ctx := range ctxs {
		at, _ := ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			t.Fatal("not done a second after its deadline")
		}
		if now := time.Now(); now.Before(at) {
			t.Fatalf("done %v before its deadline", at.Sub(now))
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("Err %v, Cause %v; want context.DeadlineExceeded", ctx.Err(), context.Cause(ctx))
		}
	}
	// A context detached once the shared deadline is too near gets a new one.
	ctx := d.detach(context.Background())
	if at, _ := ctx.Deadline(); time.Until(at) < d.after-5*time.Millisecond {
		t.Errorf("a later context's deadline %v from now, want about %v", time.Until(at), d.after)
	}
	if ctx.Err() != nil {
		t.Errorf("a later context is done: %v", ctx.Err())
	}
}

//go:build go1.25

//go:debug asynctimerchan=0

package core

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestDetachInBubble: inside a testing/synctest bubble a detached context
// ends on the bubble's clock, ReleaseTimeout after the call, and the
// shared deadline is neither used nor replaced by it. (This rests on
// time.Now having no monotonic reading in a bubble, which the runtime
// does but Go does not promise: this test says when it stops.)
func TestDetachInBubble(t *testing.T) {
	_ = Detach(context.Background())
	shared := releaseBound.cur.Load()
	synctest.Test(t, func(t *testing.T) {
		ctx := Detach(context.Background())
		if at, _ := ctx.Deadline(); !at.Equal(time.Now().Add(ReleaseTimeout)) {
			t.Errorf("deadline %v from now, want %v", time.Until(at), ReleaseTimeout)
		}
		time.Sleep(ReleaseTimeout - time.Nanosecond)
		if ctx.Err() != nil {
			t.Fatalf("done before its deadline: %v", ctx.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err %v at its deadline, want context.DeadlineExceeded", ctx.Err())
		}
	})
	if releaseBound.cur.Load() != shared {
		t.Error("a context detached in a bubble replaced the shared deadline")
	}
}

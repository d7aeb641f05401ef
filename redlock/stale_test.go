package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

// TestStaleRenewal: renewals on their way to the masters when the handle
// unlocks do not reach its next hold: the next LockFor waits for them, and
// its short lease stays short (the lock is not left held by nobody).
func TestStaleRenewal(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		held := make([]*locktest.HeldRenewal, len(ms))
		hooks := make([]redis.Hook, len(ms))
		for i := range ms {
			held[i] = locktest.NewHeldRenewal()
			hooks[i] = held[i]
		}
		m := redlock.New(ms.clientsWith(t, hooks, relock.WithWatchdogTimeout(3*time.Second)), name)
		other := redlock.New(ms.clients(t), name)
		lock(t, m)
		// Each part the handle holds is renewed within a period (1 s).
		// Lock returns on a majority: a master whose reply came late, or
		// never (its read timeout, on a loaded machine: CI88), may have no
		// part to renew. Renewals held back on a majority of masters are
		// what the next hold must wait for.
		for _, h := range held {
			h.Arm()
		}
		holding := func() (n int) {
			for _, h := range held {
				if closed(h.Holding()) {
					n++
				}
			}
			return n
		}
		require.Eventually(t, func() bool { return holding() >= len(ms)/2+1 }, 3*time.Second, 10*time.Millisecond,
			"renewals sent to a majority of masters")
		require.NoError(t, m.Unlock(ctx))
		locked := make(chan error, 1)
		go func() { locked <- m.LockFor(ctx, 300*time.Millisecond) }()
		release := func() {
			for _, h := range held {
				h.Release()
			}
		}
		var err error
		select {
		case err = <-locked:
			t.Errorf("the next hold was asked for (%v) while renewals of the last were on their way", err)
			release()
		case <-time.After(100 * time.Millisecond):
			release()
			err = <-locked
		}
		require.NoError(t, err)
		for i, h := range held {
			if closed(h.Holding()) {
				within(t, h.Landed(), 3*time.Second, fmt.Sprintf("the reply of the renewal held back on master %d", i))
			}
		}
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.NoError(t, other.Lock(octx), "the next owner, once the fixed lease ran out")
		assert.False(t, m.Held())
		require.NoError(t, other.Unlock(ctx))
		ms.clean(t, name)
	})
}

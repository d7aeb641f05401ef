package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

// Clients with different watchdog timeouts (redlock.New's own example):
// each part is taken with its own Client's lease and renewed by that
// Client's watchdog at a period that fits it, so the hold outlives the
// smallest lease many times over.
func TestMixedWatchdogTimeouts(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		short, long := 600*time.Millisecond, 3*time.Second
		leases := []time.Duration{long, short, long}
		ms = ms[:3]
		var cs []*relock.Client
		for i, l := range leases {
			cs = append(cs, ms[i:i+1].clients(t, relock.WithWatchdogTimeout(l))...)
		}
		m := redlock.New(cs, name)
		lock(t, m)

		time.Sleep(3 * short)
		require.False(t, closed(m.Lost()), "lost with every master up: %v", m.LostErr())
		assert.True(t, m.Held())
		assert.Equal(t, []int{0, 1, 2}, ms.holders(t, name))
		for i, l := range leases {
			ttl := ms[i].admin.PTTL(ctx, key(name)).Val()
			assert.Greater(t, ttl, time.Duration(0), "master %d", i)
			assert.LessOrEqual(t, ttl, l, "master %d: more than its Client's lease", i)
			if l == long {
				// Renewed every second to 3 s: its own lease, not the
				// smallest one.
				assert.Greater(t, ttl, short, "master %d: not its Client's lease", i)
			}
		}
		ok, err := redlock.New(ms.clients(t), name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "another owner got a held lock")

		require.NoError(t, m.Unlock(ctx))
		ms.clean(t, name)
	})
}

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

// A master that restarts without persistence forgets the locks it held.
// The classic failure: A holds a bare majority {0, 1, 2}; master 2 crashes
// and comes back empty at once; B then takes {2, 3, 4}, while A still
// believes it holds the lock. The delayed-restart rule (keep a crashed
// master down for longer than the longest lease) prevents it: by the time
// master 2 is back, A has lost its hold (its Lost channel fired) and its
// keys on 0 and 1 have expired.
func TestRestartWithoutPersistence(t *testing.T) {
	redistest.Parallel(t)
	for _, tc := range []struct {
		what  string
		opt   relock.Option     // the Clients'
		lease relock.LockOption // the handle's
		delay time.Duration     // before master 2 comes back
		two   bool              // two owners are expected
	}{
		// The hazard, shown with a fixed lease (A learns of nothing
		// before its lease ends): do not restart at once.
		{"immediate", nil, relock.WithLease(5 * time.Second), 0, true},
		// The rule, with a fixed lease and with the watchdog (which
		// renews on 0 and 1 but can no longer confirm a majority).
		{"delayed/fixed-lease", nil, relock.WithLease(2 * time.Second), 2400 * time.Millisecond, false},
		{"delayed/watchdog", relock.WithWatchdogTimeout(2 * time.Second), nil, 2400 * time.Millisecond, false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			ctx := context.Background()
			ms := sharedReal(t)
			r := redistest.StartManaged(t, "") // without persistence
			ms[2] = &master{addr: r.Addr, admin: r.Node(t)}
			name := redistest.Name(t)
			var copts []relock.Option
			var lopts []relock.LockOption
			if tc.opt != nil {
				copts = append(copts, tc.opt)
			}
			if tc.lease != nil {
				lopts = append(lopts, tc.lease)
			}
			a := redlock.New(ms.clients(t, copts...), name, lopts...)
			b := redlock.New(ms.clients(t, copts...), name, lopts...)

			// A takes exactly {0, 1, 2}.
			ms.plant(t, name, time.Minute, 3, 4)
			lock(t, a)
			require.Equal(t, []int{0, 1, 2}, ms.holders(t, name, 0, 1, 2))
			ms.unplant(t, name, 3, 4)

			require.NoError(t, r.Crash()) // master 2 crashes: A's key there is gone
			crash := time.Now()
			for time.Since(crash) < tc.delay {
				ok, err := b.TryLock(ctx)
				if err != nil {
					// 4 of 5 masters are up, but a loaded machine can
					// make them slower than the attempt timeout.
					require.ErrorIs(t, err, redlock.ErrNoQuorum)
					t.Logf("trylock: %v", err)
				}
				if ok {
					require.True(t, closed(a.Lost()), "B got the lock while A still held it (%v after the crash)", time.Since(crash))
					require.NoError(t, b.Unlock(ctx))
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.NoError(t, r.Start()) // empty
			t.Logf("master 2 back %v after the crash; A's hold lost: %v", time.Since(crash).Round(time.Millisecond), closed(a.Lost()))

			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			require.NoError(t, b.Lock(wctx))
			if tc.two {
				assert.False(t, closed(a.Lost()), "A noticed (expected to believe it still holds the lock)")
				assert.True(t, a.Held())
				t.Log("two owners, as expected when a master restarts at once without persistence")
			} else {
				assert.True(t, closed(a.Lost()), "two owners: B holds the lock while A's hold is not lost")
				assert.False(t, a.Held())
				assert.ErrorIs(t, a.LostErr(), relock.ErrLeaseExpired)
				assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
			}
			require.NoError(t, b.Unlock(ctx))
		})
	}
}

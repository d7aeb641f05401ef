package watchdog_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/watchdog"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestBatchedRenewal holds many locks of two kinds on one Client and checks
// that one renewal period costs a few round trips, not one per lock, that
// the locks stay held, and that no goroutine is started per lock.
func TestBatchedRenewal(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		n, lease := 2000, 600*time.Millisecond // renewed every 200 ms
		if !s.Real() {
			n, lease = 300, 1500*time.Millisecond // miniredis's Lua is far slower
		}
		rdb := s.Client(t)
		counter := &redistest.Counter{}
		rdb.AddHook(counter)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)

		goroutines := redistest.Goroutines()
		var unlocks []func(context.Context) error
		for i := 0; i < n; i++ {
			if i%2 == 0 {
				m := mutex.New(c, fmt.Sprintf("%s.%d", name, i))
				require.NoError(t, m.Lock(ctx))
				unlocks = append(unlocks, m.Unlock)
			} else {
				l := reentrant.New(c, fmt.Sprintf("%s.%d", name, i))
				require.NoError(t, l.Lock(ctx))
				unlocks = append(unlocks, l.Unlock)
			}
		}
		assert.LessOrEqual(t, redistest.Goroutines(), goroutines, "goroutines grew with held locks")

		counter.Reset()
		const periods = 4
		time.Sleep(periods * lease / 3)
		trips := counter.RoundTrips()
		cmds := counter.Commands()
		t.Logf("%d locks, %d periods: %d round trips, %d commands", n, periods, trips, cmds)
		assert.LessOrEqual(t, trips, int64(periods+1), "round trips per renewal period")
		assert.LessOrEqual(t, cmds, int64((periods+1)*(n/watchdog.BatchSize+1)), "script calls per period")
		assert.Positive(t, trips, "no renewal at all")

		for i, unlock := range unlocks {
			require.NoError(t, unlock(ctx), "lock %d lost while watched", i)
		}
	})
}

func TestSlot(t *testing.T) {
	// Reference values from Redis Cluster (CLUSTER KEYSLOT).
	for key, want := range map[string]uint16{
		"foo":            12182,
		"{user1000}.a":   3443,
		"{user1000}.b":   3443,
		"relock:x:{foo}": 12182,
		"{}foo":          watchdog.Slot("{}foo"),
		"123456789":      12739,
	} {
		assert.Equal(t, want, watchdog.Slot(key), key)
	}
}

// TestTransientFailures cuts the watchdog off from Redis: shorter than the
// lease, renewals are retried and the hold survives; longer, the hold is
// declared lost at its local deadline, and the lock is not recreated.
func TestTransientFailures(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const lease = 600 * time.Millisecond
		rdb := s.Client(t)
		faults := &redistest.Faults{}
		rdb.AddHook(faults)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))

		faults.Enable(true)
		time.Sleep(lease / 2) // at least one renewal fails
		faults.Enable(false)
		assert.Positive(t, faults.Failed.Load(), "no renewal was attempted during the outage")
		time.Sleep(lease)
		select {
		case <-m.Lost():
			t.Fatal("hold lost after an outage shorter than the lease")
		default:
		}
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "lock expired although renewals resumed")

		faults.Enable(true)
		start := time.Now()
		select {
		case <-m.Lost():
			assert.Less(t, time.Since(start), lease+200*time.Millisecond, "loss declared after the local deadline")
		case <-time.After(3 * lease):
			t.Fatal("hold not declared lost during a long outage")
		}
		faults.Enable(false)
		err = m.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		time.Sleep(lease)
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "lock still there after its lease")
	})
}

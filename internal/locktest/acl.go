package locktest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// ACL runs, on the real redis-server as a user whose rights are exactly
// the documented ACL rules (redistest.RunACL, redistest.ACLRules), the
// shared behaviours that together send every kind of command relock sends:
// lock, re-entry and unlock (Renewal), the watchdog's renewals and its
// finding a deleted lock (Renewal, LostHoldRefusesLock), a contended wait
// woken by a push, the operator's queries and force-unlock (Operator), a
// pushed hand-off and its claim (HandOff), fencing (FenceAfterLocalLoss),
// an abandoned wait, events and logs (Events), Extend and Resume (their
// scripts). RunACL fails the test if
// Redis refused the user anything on the way.
func ACL(t *testing.T, k Kind) {
	redistest.RunACL(t, func(t *testing.T) {
		redistest.Subtest(t, "Renewal", func(t *testing.T) { Renewal(t, k) })
		redistest.Subtest(t, "Operator", func(t *testing.T) { Operator(t, k) })
		redistest.Subtest(t, "HandOff", func(t *testing.T) { HandOff(t, k) })
		if k.Type != "semaphore" { // permits have no fencing token
			redistest.Subtest(t, "FenceAfterLocalLoss", func(t *testing.T) { FenceAfterLocalLoss(t, k) })
		}
		redistest.Subtest(t, "LostHoldRefusesLock", func(t *testing.T) { LostHoldRefusesLock(t, k) })
		redistest.Subtest(t, "Events", func(t *testing.T) { Events(t, k) })
		redistest.Subtest(t, "Extend", func(t *testing.T) { Extend(t, k) })
		redistest.Subtest(t, "Resume", func(t *testing.T) { Resume(t, k) })
		redistest.Subtest(t, "Metadata", func(t *testing.T) { Metadata(t, k) })
		if k.Mode != "read" {
			redistest.Subtest(t, "OwnerCheck", func(t *testing.T) { OwnerCheck(t, k) })
		}
	})
}

// OwnerCheck: the owner check of a guarded write (Run) runs with the
// rights of the documented ACL rules (its script touches no key of its
// own, which the user's rules would have to allow): it lets the holder's
// script run, and refuses a stale holder's.
func OwnerCheck(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		ok := relock.NewScript(`return 'ok'`)
		a, b := k.New(c, name), k.waiter(c, name)
		require.NoError(t, a.Lock(ctx))
		got, err := a.Run(ctx, ok, nil).Text()
		require.NoError(t, err, "the holder's guarded script")
		assert.Equal(t, "ok", got)
		deleteLock(t, s, name)
		require.NoError(t, b.Lock(ctx))
		err = a.Run(ctx, ok, nil).Err()
		assert.ErrorIs(t, err, relock.ErrLockGone, "a stale holder's guarded script")
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		require.NoError(t, b.Unlock(ctx))
	})
}

// Renewal checks that the watchdog keeps a hold (re-entered, for a
// reentrant kind) over two leases: another handle cannot take it, Lost
// does not fire, and the lease left is renewed; after the unlocks the lock
// is gone.
func Renewal(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		// 300 ms lapsed on a loaded machine, and 600 ms once (CI51:
		// semaphore's TestACL/cluster on the newest go-redis, beside the
		// static checks): no renewal landed within the local deadline.
		// The lease's length is not what is tested.
		const lease = 1500 * time.Millisecond
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		h, other := k.New(c, name), k.waiter(c, name)
		depth := lockDepth(t, k, h)
		time.Sleep(2 * lease)
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "the lock expired while the watchdog renewed it")
		select {
		case <-h.Lost():
			t.Fatalf("Lost fired while the watchdog renewed the lock: %v", h.LostErr())
		default:
		}
		assert.True(t, h.Held())
		ttl, err := h.(Queries).RemainingLease(ctx)
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= lease, "RemainingLease %v outside (0, %v]", ttl, lease)
		for i := 0; i < depth; i++ {
			require.NoError(t, h.Unlock(ctx))
		}
		assert.Empty(t, s.Keys(t, k.Key(name)), "the lock is left after its unlocks")
	})
}

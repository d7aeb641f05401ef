package locktest

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Operator checks the operator's calls: IsLocked, RemainingLease, Held,
// LostErr, and ForceUnlock, which deletes the lock whatever its owner,
// wakes a waiter whose next attempt succeeds at once (well before its
// timer), and makes the former holder's Lost fire within one renewal
// period and its Unlock return ErrNotHeld.
func Operator(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		// Renewals every second; a waiter's timer is about a second too,
		// so a waiter served within 600 ms was woken by a push.
		const lease = 3 * time.Second
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		holder, waiter := k.New(c, name), k.waiter(c, name)
		q := k.New(c, name).(Queries)

		locked, err := q.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "IsLocked on a free lock")
		ttl, err := q.RemainingLease(ctx)
		require.NoError(t, err)
		assert.Zero(t, ttl, "RemainingLease of a free lock")
		deleted, err := q.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.False(t, deleted, "ForceUnlock of a free lock deleted something")
		assert.False(t, holder.Held())
		assert.NoError(t, holder.LostErr())

		require.NoError(t, holder.Lock(ctx))
		assert.True(t, holder.Held())
		assert.False(t, waiter.Held())
		locked, err = q.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked, "IsLocked on a held lock")
		ttl, err = q.RemainingLease(ctx)
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= lease, "RemainingLease %v outside (0, %v]", ttl, lease)

		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond) // the waiter is subscribed and waiting
		forced := time.Now()
		deleted, err = q.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, deleted, "ForceUnlock of a held lock")
		select {
		case err := <-got:
			require.NoError(t, err)
			assert.Less(t, time.Since(forced), 600*time.Millisecond, "the waiter was not woken by the force-unlock")
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter never got the force-unlocked lock")
		}
		assert.True(t, waiter.Held())

		select {
		case <-holder.Lost():
			assert.Less(t, time.Since(forced), lease/3+500*time.Millisecond, "Lost fired later than a renewal period")
		case <-time.After(2 * lease):
			t.Fatal("the former holder's Lost never fired")
		}
		assert.ErrorIs(t, holder.LostErr(), relock.ErrNotHeld)
		assert.ErrorIs(t, holder.LostErr(), relock.ErrLockGone, "a force-unlocked hold is gone")
		assert.NotErrorIs(t, holder.LostErr(), relock.ErrLeaseExpired)
		assert.False(t, holder.Held(), "Held after the hold was lost")
		assert.ErrorIs(t, holder.Unlock(ctx), relock.ErrNotHeld, "the former holder's Unlock")
		assert.True(t, waiter.Held(), "the former holder's Unlock touched the new hold")
		require.NoError(t, waiter.Unlock(ctx))
		locked, err = q.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

// ForceUnlockResent: a force-unlock whose reply is lost, and that go-redis
// sends again (after its read timeout) once the waiter it woke has taken
// the lock, must not delete that waiter's hold: the second run answers as
// the first did. Otherwise the waiter goes on holding as far as it knows
// (Held, no Lost) while a third owner's TryLock gets in: two owners inside
// at once.
func ForceUnlockResent(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		holder, waiter, third := k.New(c, name), k.waiter(c, name), k.New(c, name)

		// The operator's own client, whose first reply to a script on the
		// lock is lost; go-redis resends it (its default retries).
		lose := &redistest.LoseReply{}
		ordb := s.Client(t, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
		lose.Install(ordb)
		oc := relock.New(ordb)
		t.Cleanup(func() { _ = oc.Close() })
		q := k.New(oc, name).(Queries)

		require.NoError(t, holder.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond) // the waiter is subscribed and waiting
		var woken error
		lose.OnLost = func() {
			// While the reply is on its way (and lost), the woken waiter
			// takes the lock.
			select {
			case woken = <-got:
			case <-time.After(5 * time.Second):
				woken = errors.New("the waiter did not get the force-unlocked lock")
			}
		}
		lose.Arm([]byte(name))
		deleted, err := q.ForceUnlock(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, lose.Lost.Load(), "no reply was lost: nothing was tested")
		assert.True(t, deleted, "the resent force-unlock answers as the first run did")
		require.NoError(t, woken)
		assert.True(t, waiter.Held())

		ok, err := third.TryLock(ctx)
		require.NoError(t, err)
		if !assert.False(t, ok, "a third owner got in while the woken waiter holds the lock") {
			require.NoError(t, third.Unlock(ctx))
		}
		locked, err := q.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked, "the resend deleted the woken waiter's hold")
		assert.Nil(t, waiter.LostErr())
		require.NoError(t, waiter.Unlock(ctx), "the woken waiter's hold was deleted")
	})
}

package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

// Tests of the hold as a Go value: LockFor, Extend, HoldContext and
// relock.Do over a redlock. Those that sleep and check no goroutines run
// in parallel with the others of their kind (see TestWatchdogKeepsLock).

// pttls returns the remaining TTL of name's lock key on every master (a
// negative value where it has none).
func (ms masters) pttls(t *testing.T, name string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i, m := range ms {
		d, err := m.admin.PTTL(context.Background(), key(name)).Result()
		require.NoError(t, err, "master %d", i)
		out = append(out, d)
	}
	return out
}

// allWithin waits (up to a second: a master slower than the majority
// answers after the call returned) until name's key has a TTL in (lo, hi]
// on a majority of the masters, and none above hi, and fails t if it
// does not. (A majority is what a redlock call needs and promises: on a
// loaded machine a master's reply can miss the attempt timeout, and that
// master keeps its part as it was.)
func (ms masters) allWithin(t *testing.T, name string, lo, hi time.Duration, what string) {
	t.Helper()
	ok := func() bool {
		in := 0
		for _, d := range ms.pttls(t, name) {
			if d > hi {
				return false
			}
			if d > lo {
				in++
			}
		}
		return in > len(ms)/2
	}
	if !assert.Eventually(t, ok, time.Second, 10*time.Millisecond, "%s: TTL not in (%v, %v] on a majority of the masters (or above it on one)", what, lo, hi) {
		t.Logf("TTLs: %v", ms.pttls(t, name))
	}
}

// A hold of LockFor has a lease of its own on every master, is not
// renewed, and is lost when it runs out; the next owner gets the lock
// then. A lease out of bounds is refused, and nothing written.
func TestLockFor(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		m := redlock.New(ms.clients(t), name) // watchdog timeout 30 s
		other := redlock.New(ms.clients(t), name)
		for _, bad := range []time.Duration{0, -time.Second, time.Millisecond, 8 * 24 * time.Hour} {
			assert.ErrorIs(t, m.LockFor(ctx, bad), relock.ErrInvalidOption, "LockFor(%v)", bad)
			ok, err := m.TryLockFor(ctx, bad)
			assert.ErrorIs(t, err, relock.ErrInvalidOption, "TryLockFor(%v)", bad)
			assert.False(t, ok)
		}
		assert.False(t, m.Held())
		assert.Empty(t, ms.holders(t, name), "a refused LockFor wrote something")

		const lease = 600 * time.Millisecond
		start := time.Now()
		err := m.LockFor(ctx, lease)
		for i := 0; i < 5 && errors.Is(err, redlock.ErrNoQuorum); i++ {
			start = time.Now()
			err = m.LockFor(ctx, lease) // a loaded machine: see lock
		}
		require.NoError(t, err)
		ms.allWithin(t, name, 0, lease, "a hold of LockFor")
		require.NoError(t, other.Lock(ctx), "the next owner, once the lease ran out")
		assert.GreaterOrEqual(t, time.Since(start), lease/2, "taken before the lease ran out")
		within(t, m.Lost(), time.Second, "Lost when the lease of LockFor ran out")
		assert.ErrorIs(t, m.LostErr(), relock.ErrLeaseExpired)
		held := ms.holders(t, name)
		err = m.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.Equal(t, held, ms.holders(t, name), "a stale unlock released the new owner's lock")
		require.NoError(t, other.Unlock(ctx))
		ms.clean(t, name)

		// TryLockFor, the same; then the handle's next Lock is renewed by
		// the watchdogs again, with their lease.
		ok, err := m.TryLockFor(ctx, 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		ms.allWithin(t, name, 3*time.Second, 5*time.Second, "a hold of TryLockFor")
		require.NoError(t, m.Unlock(ctx))
		ms.clean(t, name)
		lock(t, m)
		ms.allWithin(t, name, 20*time.Second, 30*time.Second, "a Lock after LockFor")
		require.NoError(t, m.Unlock(ctx))
		ms.clean(t, name)
	})
}

// Extend of a fixed lease sets it on every master (longer: the hold
// outlives its first lease; shorter: it ends then), of a watched hold
// renews it to at least d; a non-holder's Extend changes nothing; an
// Extend that finds the key gone on a majority reports the loss, and
// recreates nothing.
func TestExtend(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		cs := ms.clients(t, relock.WithWatchdogTimeout(600*time.Millisecond))
		// The first lease: not so short that it runs out on a master
		// before the Extend reaches it (500 ms did, on a loaded machine).
		const first = 1200 * time.Millisecond
		h := redlock.New(cs, name, relock.WithLease(first))
		other := redlock.New(ms.clients(t), name)

		assert.ErrorIs(t, h.Extend(ctx, time.Second), relock.ErrNotHeld, "Extend before Lock")
		assert.ErrorIs(t, h.Extend(ctx, 0), relock.ErrInvalidOption)
		lock(t, h)
		assert.ErrorIs(t, h.Extend(ctx, time.Nanosecond), relock.ErrInvalidOption)
		require.NoError(t, h.Extend(ctx, 3*time.Second))
		ms.allWithin(t, name, 2500*time.Millisecond, 3*time.Second, "after Extend")
		time.Sleep(first + 200*time.Millisecond) // past the first lease
		assert.True(t, h.Held(), "lost at the first lease's end: %v", h.LostErr())
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "taken at the first lease's end")
		assert.ErrorIs(t, other.Extend(ctx, time.Minute), relock.ErrNotHeld, "Extend by a non-owner")
		ms.allWithin(t, name, 0, 3*time.Second, "after a non-owner's Extend")

		require.NoError(t, h.Extend(ctx, 300*time.Millisecond), "a shorter lease")
		ms.allWithin(t, name, 0, 300*time.Millisecond, "after a shorter Extend")
		within(t, h.Lost(), time.Second, "Lost when the shortened lease ran out")
		assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		// Lost fires a little before the lease ends at the masters.
		require.Eventually(t, func() bool {
			ok, err := other.TryLock(ctx)
			return err == nil && ok
		}, time.Second, 10*time.Millisecond, "the lock is still held after the shortened lease ran out")
		require.NoError(t, other.Unlock(ctx))
		err = h.Extend(ctx, time.Second)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Extend after the lease ran out")
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		ms.clean(t, name)

		// A hold the watchdogs renew (every 200 ms): at least d from now
		// on, on every master.
		w := redlock.New(cs, name)
		lock(t, w)
		require.NoError(t, w.Extend(ctx, 5*time.Second))
		ms.allWithin(t, name, 4*time.Second, 5*time.Second, "a watched hold after Extend")
		time.Sleep(500 * time.Millisecond) // renewals
		ms.allWithin(t, name, 4*time.Second, 5*time.Second, "a renewal shortened the extended lease")
		require.NoError(t, w.Unlock(ctx))
		ms.clean(t, name)

		// Gone on 2 of 5 masters: the others still confirm it, the hold
		// is kept, and the 2 are not recreated.
		h = redlock.New(cs, name, relock.WithLease(time.Minute))
		lock(t, h)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)
		ms.unplant(t, name, 0, 1)
		require.NoError(t, h.Extend(ctx, 2*time.Minute), "a majority still holds it")
		assert.True(t, h.Held())
		assert.False(t, closed(h.Lost()))
		assert.Equal(t, []int{2, 3, 4}, ms.holders(t, name), "Extend recreated a lost part")
		// And on a third: lost, and nothing recreated.
		ms.unplant(t, name, 2)
		err = h.Extend(ctx, 2*time.Minute)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Extend of a lock gone on a majority")
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.True(t, closed(h.Lost()), "Lost did not fire")
		assert.ErrorIs(t, h.LostErr(), relock.ErrLockGone)
		assert.Equal(t, []int{3, 4}, ms.holders(t, name), "Extend recreated a lost part")
		assert.ErrorIs(t, h.Extend(ctx, time.Minute), relock.ErrNotHeld, "Extend of a lost hold")
		err = h.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrLockGone)
		ms.clean(t, name)

		// Another owner's TTL is never extended.
		ms.plant(t, name, time.Second, 0, 1, 2, 3, 4)
		lost := redlock.New(cs, name)
		assert.ErrorIs(t, lost.Extend(ctx, time.Hour), relock.ErrNotHeld)
		ms.allWithin(t, name, 0, time.Second, "another owner's key after Extend")
		ms.unplant(t, name, 0, 1, 2, 3, 4)
	})
}

// Extend with a majority of the masters unreachable: no quorum. A longer
// lease is not counted on where it was not confirmed: the hold is lost
// when its parts there run out. A shorter one is counted on where the
// outcome is unknown: the hold ends with it, here before the unreachable
// masters' requests time out.
func TestExtendNoQuorum(t *testing.T) {
	redistest.Parallel(t)
	runReal(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		h := redlock.New(ms.clients(t), name, relock.WithLease(1500*time.Millisecond))
		lock(t, h)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)
		ms.blackhole(true, 0, 2, 4)
		t.Cleanup(func() { ms.blackhole(false, 0, 2, 4) })
		err := h.Extend(ctx, time.Minute)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		assert.NotErrorIs(t, err, relock.ErrNotHeld)
		assert.Contains(t, err.Error(), "extended on 2 of 5 masters, 3 needed")
		// The two that confirmed have a minute; the majority does not.
		within(t, h.Lost(), 2*time.Second, "Lost when the parts not extended ran out")
		assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		ms.blackhole(false, 0, 2, 4)
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		ms.clean(t, name)

		name += ".short"
		h = redlock.New(ms.clients(t), name, relock.WithLease(time.Minute))
		lock(t, h)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)
		ms.blackhole(true, 0, 2, 4)
		start := time.Now()
		err = h.Extend(ctx, 300*time.Millisecond)
		t.Logf("Extend returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "the shorter lease ran out on a majority during Extend")
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.True(t, closed(h.Lost()))
		assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		ms.blackhole(false, 0, 2, 4)
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		ms.clean(t, name) // the stale Unlock still deleted its keys
	})
}

// A hold's context: cancelled already without a hold; not while the hold
// is valid, nor when a minority of its parts is lost; cancelled by Unlock
// (context.Canceled), and by the loss of a majority (the keys deleted on
// 2 of 3 masters), as Lost fires, with LostErr's error as its cause.
func TestHoldContext(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		ms = ms[:3]
		name := redistest.Name(t)
		const lease = 600 * time.Millisecond // renewed every 200 ms
		m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(lease)), name)

		hc := m.HoldContext(ctx)
		require.Error(t, hc.Err(), "the context of a handle that holds nothing")
		assert.ErrorIs(t, context.Cause(hc), relock.ErrNotHeld)

		lock(t, m)
		hc = m.HoldContext(ctx)
		parent, cancel := context.WithCancel(ctx)
		child := m.HoldContext(parent)
		time.Sleep(2 * lease)
		assert.NoError(t, hc.Err(), "cancelled while the hold is valid")
		cancel()
		assert.ErrorIs(t, child.Err(), context.Canceled, "a parent's end reaches the hold's context")
		assert.True(t, m.Held(), "the parent's end is not the hold's")
		require.NoError(t, m.Unlock(ctx))
		assert.ErrorIs(t, hc.Err(), context.Canceled, "Unlock ends the hold's context")
		assert.Equal(t, context.Canceled, context.Cause(hc))
		assert.ErrorIs(t, context.Cause(m.HoldContext(ctx)), relock.ErrNotHeld, "after Unlock")
		ms.clean(t, name)

		lock(t, m)
		hc = m.HoldContext(ctx)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2}), 3)
		ms.unplant(t, name, 0)
		time.Sleep(2 * lease / 3) // two renewals
		assert.NoError(t, hc.Err(), "cancelled with a majority of its parts left")
		ms.unplant(t, name, 1)
		deleted := time.Now()
		select {
		case <-hc.Done():
		case <-time.After(lease):
			t.Fatal("the hold's context outlived the loss of a majority by more than a renewal period")
		}
		t.Logf("cancelled %v after the second key was deleted", time.Since(deleted).Round(time.Millisecond))
		assert.True(t, closed(m.Lost()), "the context was cancelled before Lost fired")
		assert.ErrorIs(t, context.Cause(hc), relock.ErrNotHeld)
		assert.ErrorIs(t, context.Cause(hc), relock.ErrLockGone)
		assert.Equal(t, m.LostErr(), context.Cause(hc), "the cause is LostErr's")
		late := m.HoldContext(ctx)
		require.Error(t, late.Err(), "a new context of the lost hold")
		assert.Equal(t, m.LostErr(), context.Cause(late))
		assert.ErrorIs(t, m.Unlock(ctx), relock.ErrLockGone)
		ms.clean(t, name)
	})
}

// relock.Do over a redlock: fn runs while the lock is held, which is
// released after; when a majority of its parts is lost, fn's context is
// cancelled with the loss, and Do's error matches relock.ErrNotHeld. No
// goroutine watches the hold.
func TestDo(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		ms = ms[:3]
		name := redistest.Name(t)
		m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(600*time.Millisecond)), name)
		other := redlock.New(ms.clients(t), name)

		ran := false
		err := relock.Do(ctx, m, func(fctx context.Context) error {
			ran = true
			assert.True(t, m.Held(), "fn runs while the lock is held")
			assert.NoError(t, fctx.Err())
			assert.False(t, watchers(), "Do watches a redlock with a goroutine")
			ok, err := other.TryLock(ctx)
			assert.NoError(t, err)
			assert.False(t, ok, "another handle got the lock while fn ran")
			return nil
		})
		require.NoError(t, err)
		assert.True(t, ran)
		ms.clean(t, name)

		err = relock.Do(ctx, m, func(fctx context.Context) error {
			assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2}), 3)
			ms.unplant(t, name, 0, 2)
			select {
			case <-fctx.Done():
			case <-time.After(2 * time.Second):
				t.Error("fn's context was not cancelled when the hold was lost")
			}
			assert.ErrorIs(t, context.Cause(fctx), relock.ErrLockGone)
			return fctx.Err()
		})
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Do after a loss")
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.ErrorIs(t, err, context.Canceled, "fn's error is kept")
		ms.clean(t, name)
	})
}

// watchers reports whether a goroutine of relock.Do watches a hold (as it
// does for a Locker without HoldContext).
func watchers() bool {
	buf := make([]byte, 1<<20)
	for n := runtime.Stack(buf, true); ; n = runtime.Stack(buf, true) {
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "relock-go/relock.holdContext")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestLockForGivesUp: a LockFor that gives up waiting leaves the masters'
// queues at once (its entries name the claim of its own lease, and its
// leave must name the same).
func TestLockForGivesUp(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder, waiter := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)
		require.NoError(t, holder.Lock(ctx))
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := waiter.LockFor(wctx, time.Second)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		require.NoError(t, holder.Unlock(ctx))
		ms.clean(t, name) // within a second: not after the waiter's heartbeat (5 s)
	})
}

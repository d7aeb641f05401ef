package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
)

// HoldContext: a handle's HoldContext is cancelled already when it holds
// nothing, is never cancelled while the hold is valid (renewed), and is
// cancelled when the hold ends: by Unlock (cause context.Canceled), by a
// loss within one renewal period (the key deleted: ErrLockGone; the
// Client closed: ErrClosed), as Lost fires, with LostErr's error as its
// cause. (HoldContextGoroutines checks that it starts no goroutine.)
func HoldContext(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		// Renewed every 333 ms: a lease of 600 ms ran out in CI63's
		// loaded first pass, the process stalled between two renewals.
		const lease = time.Second
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		h := k.New(c, name)

		hc := h.HoldContext(ctx)
		require.Error(t, hc.Err(), "the context of a handle that holds nothing")
		assert.ErrorIs(t, context.Cause(hc), relock.ErrNotHeld)

		require.NoError(t, h.Lock(ctx))
		hc = h.HoldContext(ctx)
		parent, cancel := context.WithCancel(ctx)
		child := h.HoldContext(parent)
		time.Sleep(lease + lease/2) // past the first lease: renewed
		assert.NoError(t, hc.Err(), "cancelled while the hold is valid")
		cancel()
		assert.ErrorIs(t, child.Err(), context.Canceled, "a parent's end reaches the hold's context")
		assert.True(t, h.Held(), "the parent's end is not the hold's")
		require.NoError(t, h.Unlock(ctx))
		assert.ErrorIs(t, hc.Err(), context.Canceled, "Unlock ends the hold's context")
		assert.Equal(t, context.Canceled, context.Cause(hc))

		// A loss: the key deleted behind the holder's back.
		require.NoError(t, h.Lock(ctx))
		hc = h.HoldContext(ctx)
		deleted := time.Now()
		deleteLock(t, s, name)
		select {
		case <-hc.Done():
		case <-time.After(lease):
			t.Fatal("the hold's context outlived its loss by more than a renewal period")
		}
		t.Logf("cancelled %v after the key was deleted", time.Since(deleted).Round(time.Millisecond))
		assert.ErrorIs(t, context.Cause(hc), relock.ErrNotHeld)
		assert.ErrorIs(t, context.Cause(hc), relock.ErrLockGone)
		select {
		case <-h.Lost():
		default:
			t.Error("the context was cancelled before Lost fired")
		}
		assert.Equal(t, h.LostErr(), context.Cause(hc), "the cause is LostErr's")
		assert.ErrorIs(t, h.HoldContext(ctx).Err(), context.Canceled, "a new context of the lost hold")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)

		// A loss: the Client closed.
		c2, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		h2 := k.New(c2, name)
		require.NoError(t, h2.Lock(ctx))
		hc = h2.HoldContext(ctx)
		require.NoError(t, c2.Close())
		select {
		case <-hc.Done():
		case <-time.After(time.Second):
			t.Fatal("the hold's context outlived the Client")
		}
		assert.ErrorIs(t, context.Cause(hc), relock.ErrClosed)
		assert.ErrorIs(t, h2.Unlock(ctx), relock.ErrNotHeld)

		// A loss seen by an observer of EventLost, which runs before Lost
		// fires: a HoldContext it asks for is not done yet (a done one
		// means Lost has fired), and ends with the loss.
		var h3 Handle
		seen := make(chan context.Context, 1)
		lostThen := make(chan bool, 1)
		c3, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease), relock.WithObserver(func(ev relock.Event) {
			if ev.Type == relock.EventLost && ev.Name == name {
				hc := h3.HoldContext(ctx)
				if hc.Err() != nil {
					lostThen <- core.IsClosed(h3.Lost())
				}
				seen <- hc
			}
		}))
		h3 = k.New(c3, name)
		require.NoError(t, h3.Lock(ctx))
		deleteLock(t, s, name)
		select {
		case hc = <-seen:
		case <-time.After(2 * lease):
			t.Fatal("no EventLost after the key was deleted")
		}
		select {
		case fired := <-lostThen:
			assert.True(t, fired, "an observer of the loss got a done HoldContext before Lost fired")
		default:
		}
		select {
		case <-hc.Done():
		case <-time.After(time.Second):
			t.Fatal("the context an observer of the loss got outlived the loss")
		}
		assert.ErrorIs(t, context.Cause(hc), relock.ErrLockGone)
		assert.ErrorIs(t, h3.Unlock(ctx), relock.ErrNotHeld)
	})
}

// HoldContextGoroutines: a hold's contexts start no goroutine, and leave
// none behind, whichever way they end (their parent's end, Unlock, a loss,
// the Client closed). It counts the goroutines of the whole process: it
// runs alone.
func HoldContextGoroutines(t *testing.T, k Kind) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		h := k.New(c, name)
		ended := func(hc context.Context, what string) {
			t.Helper()
			select {
			case <-hc.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("the hold's context did not end: %s", what)
			}
		}
		_ = h.HoldContext(ctx)
		require.NoError(t, h.Lock(ctx))
		hc := h.HoldContext(ctx)
		parent, cancel := context.WithCancel(ctx)
		child := h.HoldContext(parent)
		cancel()
		ended(child, "its parent ended")
		require.NoError(t, h.Unlock(ctx))
		ended(hc, "Unlock")

		require.NoError(t, h.Lock(ctx))
		hc = h.HoldContext(ctx)
		deleteLock(t, s, name)
		ended(hc, "the key deleted")
		assert.ErrorIs(t, context.Cause(hc), relock.ErrLockGone, "a renewal found the key gone")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)

		c2, _ := redistest.NewClient(t, s)
		h2 := k.New(c2, name)
		require.NoError(t, h2.Lock(ctx))
		hc = h2.HoldContext(ctx)
		require.NoError(t, c2.Close())
		ended(hc, "the Client closed")
	})
}

// HoldContextUnreachable: while Redis is unreachable, the hold's context
// is cancelled at the hold's local deadline (no renewal confirmed), with
// cause ErrLeaseExpired.
func HoldContextUnreachable(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const lease = 600 * time.Millisecond
		rdb, cut := unreachable(t, s)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		h := k.New(c, redistest.Name(t))
		require.NoError(t, h.Lock(ctx))
		hc := h.HoldContext(ctx)
		cut(true)
		at := time.Now()
		select {
		case <-hc.Done():
		case <-time.After(lease + 500*time.Millisecond):
			t.Fatal("the hold's context outlived its lease while Redis was unreachable")
		}
		t.Logf("cancelled %v after the cut", time.Since(at).Round(time.Millisecond))
		assert.Less(t, time.Since(at), lease+200*time.Millisecond)
		assert.ErrorIs(t, context.Cause(hc), relock.ErrLeaseExpired)
		cut(false)
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
	})
}

// unreachable returns a client of s whose traffic cut(true) stops: a
// black-holing proxy in front of a single server, a hook that fails every
// command on a Cluster.
func unreachable(t *testing.T, s *redistest.Server) (redis.UniversalClient, func(bool)) {
	if s.Cluster != nil {
		rdb := s.Client(t)
		faults := &redistest.Faults{}
		redistest.AddHook(rdb, faults)
		return rdb, faults.Enable
	}
	p := redistest.NewProxy(t, s.Addr)
	rdb := s.Client(t, func(o *redis.Options) {
		o.Addr = p.Addr
		o.ReadTimeout = 200 * time.Millisecond
	})
	return rdb, p.Blackhole
}

var errBoom = errors.New("boom")

// Do: relock.Do holds the lock while fn runs and releases it after, with
// fn's error; after a panic (which goes on); when the hold is lost while
// fn runs, fn's context is cancelled with the loss as its cause and Do's
// error matches ErrNotHeld and the loss's reason; a ctx that ends while fn
// runs does not keep the lock from being released. It checks that Do
// leaves no goroutine behind (it counts them: it runs alone).
func Do(t *testing.T, k Kind) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		h, other := k.New(c, name), k.waiter(c, name)
		l := lockerOf(h)
		free := func(what string) {
			t.Helper()
			// After a loss by the deletion of the lock's main key, an
			// rwlock's or a semaphore's other key keeps the lost
			// owner's entry until its lease ends (600 ms here).
			require.Eventually(t, func() bool {
				ok, err := other.TryLock(ctx) // no t here: it may outlive t
				return err == nil && ok
			}, 2*time.Second, 10*time.Millisecond, "%s: the lock is still held (or TryLock fails)", what)
			require.NoError(t, other.Unlock(ctx))
		}

		ran := false
		err := relock.Do(ctx, l, func(fctx context.Context) error {
			ran = true
			assert.True(t, h.Held(), "fn runs while the lock is held")
			assert.NoError(t, fctx.Err())
			ok, err := other.TryLock(ctx)
			assert.NoError(t, err)
			assert.False(t, ok, "another handle got the lock while fn ran")
			return errBoom
		})
		assert.True(t, ran)
		assert.ErrorIs(t, err, errBoom, "fn's error")
		assert.NotErrorIs(t, err, relock.ErrNotHeld)
		free("after Do")

		assert.PanicsWithValue(t, "boom", func() {
			_ = relock.Do(ctx, l, func(context.Context) error { panic("boom") })
		})
		free("after a panic in fn")

		dctx, cancel := context.WithCancel(ctx)
		require.NoError(t, relock.Do(dctx, l, func(context.Context) error {
			cancel() // the caller's ctx ends while fn runs
			return nil
		}))
		free("after Do whose ctx ended while fn ran")

		// lose deletes the lock while fn runs, and waits for fn's context
		// to end.
		lose := func(fctx context.Context) {
			deleteLock(t, s, name)
			select {
			case <-fctx.Done():
			case <-time.After(2 * time.Second):
				t.Error("fn's context was not cancelled when the hold was lost")
			}
		}
		err = relock.Do(ctx, l, func(fctx context.Context) error {
			lose(fctx)
			assert.ErrorIs(t, context.Cause(fctx), relock.ErrLockGone)
			return fctx.Err()
		})
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Do after a loss")
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.ErrorIs(t, err, context.Canceled, "fn's error is kept")
		free("after a lost hold")

		// fn returns its context's cause, the loss: Do says it once.
		err = relock.Do(ctx, l, func(fctx context.Context) error {
			lose(fctx)
			return context.Cause(fctx)
		})
		assert.ErrorIs(t, err, relock.ErrLockGone, "Do after a loss")
		if err != nil {
			assert.Equal(t, 1, strings.Count(err.Error(), "lock gone"), "the loss said once: %q", err)
		}
		free("after a lost hold whose cause fn returned")
	})
}

// Extend: Extend sets a fixed lease (longer: the TTL grows and the hold
// outlives its first lease; shorter: it ends then), renews a watched hold
// to at least d, fails with ErrNotHeld and writes nothing when the handle
// does not hold the lock or Redis no longer has it as its own (another
// owner's TTL is untouched). (ExtendStalled checks it is applied once when
// the server stalls past the client's read timeout.)
func Extend(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		admin := s.Admin(t)
		name := redistest.Name(t)
		pttl := func() time.Duration { return admin.PTTL(ctx, k.Key(name)).Val() }

		h := k.New(c, name, relock.WithLease(500*time.Millisecond))
		other := k.waiter(c, name)
		assert.ErrorIs(t, h.Extend(ctx, time.Second), relock.ErrNotHeld, "Extend before Lock")
		assert.ErrorIs(t, h.Extend(ctx, 0), relock.ErrInvalidOption)
		require.NoError(t, h.Lock(ctx))
		assert.ErrorIs(t, h.Extend(ctx, time.Nanosecond), relock.ErrInvalidOption)
		require.NoError(t, h.Extend(ctx, 3*time.Second))
		assert.Greater(t, pttl(), 2500*time.Millisecond, "the TTL after Extend")
		time.Sleep(700 * time.Millisecond) // past the first lease
		assert.True(t, h.Held(), "lost at the first lease's end")
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "taken at the first lease's end")
		assert.ErrorIs(t, other.Extend(ctx, time.Minute), relock.ErrNotHeld, "Extend by a non-owner")
		assert.LessOrEqual(t, pttl(), 3*time.Second, "a non-owner's Extend changed the TTL")
		require.NoError(t, h.Extend(ctx, 300*time.Millisecond), "a shorter lease")
		select {
		case <-h.Lost():
			assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		case <-time.After(time.Second):
			t.Fatal("the shortened lease did not end the hold")
		}
		// Lost fires a little before the lease ends at Redis (the drift).
		require.Eventually(t, func() bool {
			ok, err := other.TryLock(ctx)
			return err == nil && ok
		}, 500*time.Millisecond, 5*time.Millisecond, "the lock is still held at Redis after the shortened lease ran out")
		require.NoError(t, other.Unlock(ctx))
		assert.ErrorIs(t, h.Extend(ctx, time.Second), relock.ErrNotHeld, "Extend after the lease ran out")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)

		// Redis no longer has the hold as this handle's (deleted, then
		// taken by another owner), before the handle could know. (An
		// rwlock's or a semaphore's other key, the owners' expiries,
		// keeps the handle's entry until its lease ends: short, but not
		// so short that it runs out before the Extend: 1 s did, on a
		// loaded machine.)
		h = k.New(c, name, relock.WithLease(2*time.Second))
		require.NoError(t, h.Lock(ctx))
		deleteLock(t, s, name)
		err = h.Extend(ctx, time.Minute)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Extend of a deleted lock")
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.Zero(t, admin.Exists(ctx, k.Key(name)).Val(), "Extend recreated the lock")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		// A stale holder whose lock another owner took before it could
		// know: its Extend reaches Redis, which refuses it and leaves the
		// other owner's TTL as it was. The other owner's hold has a fixed
		// lease: nothing of its own renews it between the two reads.
		g := k.New(c, name, relock.WithLease(2*time.Second))
		require.NoError(t, g.Lock(ctx))
		deleteLock(t, s, name)
		fixed := k.waiter(c, name, relock.WithLease(time.Minute))
		require.NoError(t, fixed.Lock(ctx))
		before := pttl()
		err = g.Extend(ctx, time.Hour)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "Extend by a stale holder")
		assert.ErrorIs(t, err, relock.ErrLockGone, "Redis refused the stale holder's Extend")
		assert.LessOrEqual(t, pttl(), before, "another owner's TTL was extended")
		assert.ErrorIs(t, g.Unlock(ctx), relock.ErrNotHeld)
		require.NoError(t, fixed.Unlock(ctx))

		// A hold the watchdog renews: at least d from now on. A renewal
		// or an Extend that shortened it would leave at most the
		// watchdog's 600 ms: the bound is 2 s, not 4, so that a stall of
		// the process between renewals is not taken for one (CI63's
		// loaded first pass read 3.963 s, its last renewal 1 s old).
		w := k.New(c, name)
		require.NoError(t, w.Lock(ctx))
		require.NoError(t, w.Extend(ctx, 5*time.Second))
		assert.Greater(t, pttl(), 2*time.Second)
		time.Sleep(500 * time.Millisecond) // renewals (every 200 ms)
		assert.Greater(t, pttl(), 2*time.Second, "a renewal shortened the extended lease")
		require.NoError(t, w.Extend(ctx, 10*time.Millisecond), "a renewal now")
		assert.Greater(t, pttl(), 2*time.Second, "Extend of a watched hold shortened it")
		require.NoError(t, w.Unlock(ctx))
		assert.Eventually(t, func() bool { return admin.Exists(ctx, k.Key(name)).Val() == 0 },
			2*time.Second, 10*time.Millisecond, "the lock's key is left")
	})
}

// ExtendLateReply: an Extend that Redis applies, whose reply comes after
// the hold's local deadline passed (the watchdog declared the hold lost
// meanwhile), reports the loss and gives back what it extended: the lock
// used to stay for the new lease, as a lost hold's Unlock sends nothing.
// The reply is held back by a hook until Lost fires. But an Extend whose
// Client was closed meanwhile gives nothing back: a closed Client's holds
// stay at Redis, for another process to Resume.
func ExtendLateReply(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := redistest.NewClient(t, s)
		admin := s.Admin(t)
		name := redistest.Name(t)
		late := &lateReply{}
		redistest.AddHook(rdb, late)
		h := k.New(c, name, relock.WithLease(300*time.Millisecond))
		require.NoError(t, h.Lock(ctx))
		late.hold(h.Lost())
		err := h.Extend(ctx, time.Hour)
		late.hold(nil)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "an Extend confirmed after the hold was declared lost")
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.Zero(t, admin.Exists(ctx, k.Key(name)).Val(), "the lock an Extend of a lost hold extended is left")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		next := k.waiter(c, name)
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.NoError(t, next.Lock(lctx), "the next owner, once the lost hold was given back")
		require.NoError(t, next.Unlock(ctx))

		// The Client closed while the Extend's reply is on its way: its
		// holds stay at Redis for their lease, for another process to
		// Resume; the Extend gives nothing back.
		c2, rdb2 := redistest.NewClient(t, s)
		late2 := &lateReply{holding: make(chan struct{})}
		redistest.AddHook(rdb2, late2)
		h2 := k.New(c2, name, relock.WithLease(10*time.Second))
		require.NoError(t, h2.Lock(ctx))
		late2.hold(h2.Lost())
		go closeWhenHeld(late2, c2)
		err = h2.Extend(ctx, time.Minute)
		late2.hold(nil)
		assert.ErrorIs(t, err, relock.ErrClosed)
		assert.Equal(t, int64(1), admin.Exists(ctx, k.Key(name)).Val(),
			"an Extend applied after Close deleted the hold, not left for another process to Resume")
		require.NoError(t, admin.Del(ctx, k.Key(name)).Err())
	})
}

// ReentryLateReply: a re-entry that Redis grants, whose reply comes after
// the hold it adds to was declared lost (its fixed lease ran out locally),
// fails with the loss, and the hold it renewed at Redis is given back:
// the next owner need not wait out a lease nobody will release; but a hold
// lost because its Client was closed stays at Redis (for another process
// to Resume): only the re-entry is undone. For the kinds whose holding
// handle may lock again.
func ReentryLateReply(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := redistest.NewClient(t, s)
		admin := s.Admin(t)
		name := redistest.Name(t)
		late := &lateReply{match: func(cmd redis.Cmder) bool { return redistest.IsScript(cmd.Name()) && !renewal(cmd) }}
		redistest.AddHook(rdb, late)
		h := k.New(c, name, relock.WithLease(600*time.Millisecond))
		require.NoError(t, h.Lock(ctx))
		late.hold(h.Lost())
		err := h.Lock(ctx) // re-entry: its lease at Redis is a full 600 ms again
		late.hold(nil)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "a re-entry confirmed after the hold was declared lost")
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.False(t, h.Held())
		assert.Zero(t, admin.Exists(ctx, k.Key(name)).Val(), "the hold a late re-entry renewed is left")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		next := k.waiter(c, name)
		ok, err := next.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok, "the next owner, once the lost hold was given back")
		if ok {
			require.NoError(t, next.Unlock(ctx))
		}

		// The Client closed while the re-entry's reply is on its way.
		c2, rdb2 := redistest.NewClient(t, s)
		late2 := &lateReply{match: late.match, holding: make(chan struct{})}
		redistest.AddHook(rdb2, late2)
		h2 := k.New(c2, name, relock.WithLease(10*time.Second))
		require.NoError(t, h2.Lock(ctx))
		late2.hold(h2.Lost())
		go closeWhenHeld(late2, c2)
		err = h2.Lock(ctx)
		late2.hold(nil)
		assert.ErrorIs(t, err, relock.ErrClosed)
		assert.Equal(t, int64(1), admin.Exists(ctx, k.Key(name)).Val(),
			"a closed Client's hold was deleted, not left for another process to Resume")
		require.NoError(t, admin.Del(ctx, k.Key(name)).Err())
	})
}

// closeWhenHeld closes c once late holds a reply back (the call under
// test was applied at Redis and its reply is on its way), or after 5 s:
// then the call was never sent, and the test's assertions on the reply's
// fate fail.
func closeWhenHeld(late *lateReply, c *relock.Client) {
	select {
	case <-late.holding:
	case <-time.After(5 * time.Second):
	}
	_ = c.Close()
}

// ExtendStalled: when the server stalls past the client's read timeout,
// go-redis resends the Extend, which is applied once. It stalls the
// server that the binary's tests share (DEBUG SLEEP): it runs alone.
func ExtendStalled(t *testing.T, k Kind) {
	redistest.Exclusive(t, "DEBUG SLEEP stalls every client of the server")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		if !s.Real() {
			t.Skip("miniredis has no DEBUG SLEEP")
		}
		ctx := testCtx(t)
		admin := s.Admin(t)
		name := redistest.Name(t)
		sc := relock.New(redistest.StallClient(t, s))
		t.Cleanup(func() { _ = sc.Close() })
		h := k.New(sc, name, relock.WithLease(time.Second))
		require.NoError(t, h.Lock(ctx))
		redistest.Stall(t, admin, 200*time.Millisecond)
		require.NoError(t, h.Extend(ctx, 3*time.Second), "Extend during a stall")
		d := admin.PTTL(ctx, k.Key(name)).Val()
		assert.LessOrEqual(t, d, 3*time.Second)
		assert.Greater(t, d, 2500*time.Millisecond)
		require.NoError(t, h.Unlock(ctx))
	})
}

// LockFor: a hold taken with LockFor has its own fixed lease: the TTL is
// that lease, the watchdog does not renew it, it is lost when it runs out
// (and the next owner gets the lock then); a lease out of bounds is
// refused before anything is sent.
func LockFor(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s) // watchdog timeout 30 s
		name := redistest.Name(t)
		h, other := k.New(c, name), k.waiter(c, name)
		for _, bad := range []time.Duration{0, -time.Second, time.Millisecond, 8 * 24 * time.Hour} {
			assert.ErrorIs(t, h.LockFor(ctx, bad), relock.ErrInvalidOption, "LockFor(%v)", bad)
		}
		assert.False(t, h.Held())
		require.NoError(t, h.LockFor(ctx, 400*time.Millisecond))
		d := s.Admin(t).PTTL(ctx, k.Key(name)).Val()
		assert.LessOrEqual(t, d, 400*time.Millisecond, "the TTL of a hold of LockFor")
		assert.Positive(t, d)
		start := time.Now()
		require.NoError(t, other.Lock(ctx), "the next owner, once the lease ran out")
		assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "taken before the lease ran out")
		select {
		case <-h.Lost():
			assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		case <-time.After(time.Second):
			t.Fatal("a hold of LockFor was not lost when its lease ran out")
		}
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
		require.NoError(t, other.Unlock(ctx))
		// The handle's next Lock is a hold the watchdog renews again.
		require.NoError(t, h.Lock(ctx))
		assert.Greater(t, s.Admin(t).PTTL(ctx, k.Key(name)).Val(), 20*time.Second)
		require.NoError(t, h.Unlock(ctx))
	})
}

// ReentryShorterLease: a handle whose hold has a fixed lease locks again
// with a shorter one (LockFor). Whatever lease Redis keeps then, the
// handle never holds the lock while another handle does: once another
// takes it, the first reports its hold lost. The reentrant, fair and
// read/write locks set the lease asked for (as Extend does), so another
// handle takes the lock once it ran out; a semaphore's permits keep the
// longer lease (Kind.KeepsLonger). The same holds when the re-entry ran
// at Redis but was given back, its caller's ctx ended while its reply was
// on its way (gaveUp): the abort gives back its count, not the lease it
// set.
func ReentryShorterLease(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		reentryShorterLease(t, s, k, false)
		if !k.KeepsLonger { // a semaphore's given-back permit is free at once
			reentryShorterLease(t, s, k, true)
		}
	})
}

func reentryShorterLease(t *testing.T, s *redistest.Server, k Kind, gaveUp bool) {
	ctx := testCtx(t)
	c, rdb := redistest.NewClient(t, s)
	name := redistest.Name(t)
	h, other := k.New(c, name), k.waiter(c, name)
	require.NoError(t, h.LockFor(ctx, 10*time.Second))
	if gaveUp {
		late := &lateReply{match: func(cmd redis.Cmder) bool { return redistest.IsScript(cmd.Name()) && !renewal(cmd) },
			holding: make(chan struct{})}
		redistest.AddHook(rdb, late)
		rctx, cancel := context.WithCancel(ctx)
		release := make(chan struct{})
		late.hold(release)
		go func() {
			select {
			case <-late.holding:
			case <-time.After(5 * time.Second):
			}
			cancel()
			close(release)
		}()
		require.ErrorIs(t, h.LockFor(rctx, 500*time.Millisecond), context.Canceled)
		late.hold(nil)
		require.True(t, h.Held(), "the outer hold, after the re-entry was given back")
	} else {
		require.NoError(t, h.LockFor(ctx, 500*time.Millisecond))
	}
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := other.Lock(octx)
	cancel()
	if k.KeepsLonger {
		require.ErrorIs(t, err, context.DeadlineExceeded, "taken while the longer lease lasts")
		assert.True(t, h.Held(), "the hold of the longer lease, declared lost")
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, h.Unlock(ctx))
		assert.False(t, h.Held())
		return
	}
	require.NoError(t, err, "the next owner, once the re-entry's lease ran out")
	assert.False(t, h.Held(), "this handle holds the lock while another does")
	assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
	assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
	require.NoError(t, other.Unlock(ctx))
}

// StaleRenewal: a renewal of a handle's hold that is on its way when the
// handle releases it does not reach the handle's next hold: the next
// acquire waits for it (its owner check knows only the owner token, and
// would give the next hold, here a short fixed lease, the watchdog's
// lease: the lock would stay held after the handle declared it lost).
func StaleRenewal(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(3*time.Second))
		held := NewHeldRenewal()
		redistest.AddHook(rdb, held)
		name := redistest.Name(t)
		h, other := k.New(c, name), k.waiter(c, name)
		require.NoError(t, h.Lock(ctx))
		held.Arm()
		select {
		case <-held.Holding():
		case <-time.After(3 * time.Second):
			t.Fatal("no renewal was sent")
		}
		require.NoError(t, h.Unlock(ctx))
		// A ctx that ends while the attempt waits for the renewal: nothing
		// is sent, nothing held.
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := h.LockFor(sctx, 300*time.Millisecond)
		cancel()
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, h.Held())
		locked := make(chan error, 1)
		go func() { locked <- h.LockFor(ctx, 300*time.Millisecond) }()
		select {
		case err = <-locked:
			t.Errorf("the next hold was asked for (%v) while a renewal of the last was on its way", err)
			held.Release()
		case <-time.After(100 * time.Millisecond):
			held.Release()
			err = <-locked
		}
		require.NoError(t, err)
		select {
		case <-held.Landed():
		case <-time.After(3 * time.Second):
			t.Fatal("the renewal held back never had its reply")
		}
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.NoError(t, other.Lock(octx), "the next owner, once the fixed lease ran out")
		assert.False(t, h.Held())
		assert.ErrorIs(t, h.LostErr(), relock.ErrLeaseExpired)
		require.NoError(t, other.Unlock(ctx))
	})
}

// deleteLock deletes every key of the lock called name but its fencing
// counter, as an operator (or a FLUSH, or a failover that lost them)
// would: its holders' holds are gone.
func deleteLock(t *testing.T, s *redistest.Server, name string) {
	t.Helper()
	admin := s.Admin(t)
	for _, key := range s.Keys(t, "relock:*{"+name+"}*") {
		if !strings.HasSuffix(key, ":fence") {
			require.NoError(t, admin.Del(context.Background(), key).Err())
		}
	}
}

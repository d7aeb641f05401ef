package relock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// TestDoMulti: relock.Do over a Multi holds every part while fn runs;
// fn's context ends when a part is lost, with that part's loss as its
// cause, and Do's error says so; the Multi's HoldContext ends on Unlock.
func TestDoMulti(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		a, b := mutex.New(c, name+".a"), reentrant.New(c, name+".b")
		m := relock.MultiLock(a, b)
		require.NoError(t, relock.Do(ctx, m, func(ctx context.Context) error {
			assert.True(t, a.Held())
			assert.True(t, b.Held())
			return ctx.Err()
		}))
		assert.True(t, free(t, c, a))
		assert.True(t, free(t, c, b))

		err := relock.Do(ctx, m, func(fctx context.Context) error {
			require.NoError(t, s.Admin(t).Del(ctx, "relock:reentrant:{"+name+".b}").Err())
			select {
			case <-fctx.Done():
			case <-time.After(2 * time.Second):
				t.Error("fn's context outlived the loss of a part")
			}
			assert.ErrorIs(t, context.Cause(fctx), relock.ErrLockGone)
			return nil
		})
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.ErrorIs(t, m.LostErr(), relock.ErrLockGone)
		assert.True(t, free(t, c, a), "the part that was not lost is released")

		require.NoError(t, m.Lock(ctx))
		hc := m.HoldContext(ctx)
		assert.NoError(t, hc.Err())
		require.NoError(t, m.Unlock(ctx))
		assert.ErrorIs(t, hc.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(m.HoldContext(ctx)), relock.ErrNotHeld, "the context of a Multi that holds nothing")
	})
}

// TestMultiLockForExtend: a Multi's LockFor gives every part the lease
// (the read side of an rwlock and permits of a semaphore too), and Extend
// extends every part.
func TestMultiLockForExtend(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		parts := []relock.Locker{mutex.New(c, name+".a"), fair.New(c, name+".b"), rwlock.New(c, name+".c"),
			rwlock.New(c, name+".d").RLocker(), semaphore.New(c, name+".e", 3).Locker(2)}
		m := relock.MultiLock(parts...)
		keys := []string{"relock:mutex:{" + name + ".a}", "relock:fair:{" + name + ".b}", "relock:rwlock:{" + name + ".c}",
			"relock:rwlock:{" + name + ".d}", "relock:semaphore:{" + name + ".e}"}
		admin := s.Admin(t)
		assert.ErrorIs(t, m.LockFor(ctx, 0), relock.ErrInvalidOption)
		assert.ErrorIs(t, m.Extend(ctx, time.Second), relock.ErrNotHeld, "Extend before Lock")
		// Not so short that it runs out before the Extend: 500 ms and
		// 1.5 s did, on a loaded machine (CI, the five parts' LockFor and
		// their checks took longer than that).
		const lease = 4 * time.Second
		require.NoError(t, m.LockFor(ctx, lease))
		for _, k := range keys {
			d := admin.PTTL(ctx, k).Val()
			assert.LessOrEqual(t, d, lease, k)
			assert.Positive(t, d, k)
		}
		require.NoError(t, m.Extend(ctx, 3*lease))
		for _, k := range keys {
			assert.Greater(t, admin.PTTL(ctx, k).Val(), 2*lease, k)
		}
		time.Sleep(lease + 200*time.Millisecond) // past the first lease
		for _, l := range parts {
			assert.False(t, free(t, c, l), "%s lost at the end of the first lease", l.Name())
		}
		require.NoError(t, m.Unlock(ctx))
		assert.Empty(t, lockKeys(t, s, name))
	})
}

// fakeLocker is a Locker of another package: Do watches its Lost channel
// with a goroutine of its own.
type fakeLocker struct {
	mu       sync.Mutex
	held     bool
	lost     chan struct{}
	unlocked context.Context // the ctx of the last Unlock
}

func (f *fakeLocker) Lock(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.lost = true, make(chan struct{})
	return nil
}
func (f *fakeLocker) TryLock(ctx context.Context) (bool, error) { return true, f.Lock(ctx) }
func (f *fakeLocker) Unlock(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlocked = ctx
	if err := ctx.Err(); err != nil { // as a Locker that honours its ctx would
		return err
	}
	if !f.held {
		return relock.ErrNotHeld
	}
	f.held = false
	return nil
}
func (f *fakeLocker) Lost() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}
func (f *fakeLocker) Kind() string { return "fake" }
func (f *fakeLocker) Name() string { return "fake" }

// TestDoOtherLocker: Do with a Locker of another package cancels fn's
// context when its Lost fires (cause ErrNotHeld), and leaves no goroutine.
func TestDoOtherLocker(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.CheckGoroutinesOf(t, "Do's watchers", func(stack string) bool {
		return strings.Contains(stack, "relock.holdContext")
	})
	ctx := testCtx(t)
	f := &fakeLocker{}
	require.NoError(t, relock.Do(ctx, f, func(ctx context.Context) error { return ctx.Err() }))
	err := relock.Do(ctx, f, func(fctx context.Context) error {
		close(f.lost)
		<-fctx.Done()
		assert.ErrorIs(t, context.Cause(fctx), relock.ErrNotHeld)
		return errors.New("stopped")
	})
	assert.EqualError(t, err, "stopped")
	// The caller's ctx ends while fn runs: the release is still made.
	cctx, cancel := context.WithCancel(ctx)
	err = relock.Do(cctx, f, func(context.Context) error { cancel(); return nil })
	require.NoError(t, err, "Do's release after the caller's ctx ended")
	assert.False(t, f.held, "the lock kept after Do returned")
	assert.ErrorIs(t, f.unlocked.Err(), context.Canceled, "the context Do gave Unlock outlived it")
	// The same through a Multi, which passes its ctx on to the part.
	cctx, cancel = context.WithCancel(ctx)
	err = relock.Do(cctx, relock.MultiLock(f), func(context.Context) error { cancel(); return nil })
	require.NoError(t, err, "Do's release of a Multi after the caller's ctx ended")
	assert.False(t, f.held, "the Multi's part kept after Do returned")
	assert.ErrorIs(t, relock.Do(ctx, nil, func(context.Context) error { return nil }), relock.ErrInvalidOption)
	assert.ErrorIs(t, relock.Do(ctx, f, nil), relock.ErrInvalidOption)
	var typedNil *mutex.Mutex
	assert.ErrorIs(t, relock.Do(ctx, typedNil, func(context.Context) error { return nil }), relock.ErrInvalidOption)
}

// panicky is a Locker of another package whose Unlock panics.
type panicky struct{ fakeLocker }

func (p *panicky) Unlock(context.Context) error { panic("unlock failed") }

// TestMultiLockPartPanics: a part's Unlock that panics (a Locker of another
// package) panics in the caller of the Multi's Unlock, as it did when the
// parts were released one after another, not in a goroutine of its own
// (which would crash the process).
func TestMultiLockPartPanics(t *testing.T) {
	redistest.Parallel(t)
	ctx := testCtx(t)
	m := relock.MultiLock(&panicky{})
	require.NoError(t, m.Lock(ctx))
	assert.PanicsWithValue(t, "unlock failed", func() { _ = m.Unlock(ctx) })
}

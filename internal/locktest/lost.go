package locktest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// LostHoldRefusesLock checks the rule for a handle whose hold was lost
// (here: its key deleted by an operator): until the caller has unlocked as
// many times as it locked, every Lock and TryLock of the handle fails with
// ErrNotHeld and takes nothing (a nested Lock must never start a fresh
// hold under an outer critical section that is no longer protected); each
// of those unlocks reports ErrNotHeld; after them, Lock starts a new hold.
//
// It runs twice: once after the watchdog has reported the loss (Lost has
// fired), and, for reentrant kinds, once before it (the re-entry itself
// finds the hold gone).
func LostHoldRefusesLock(t *testing.T, k Kind) {
	redistest.Subtest(t, "after-lost", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, s *redistest.Server) {
			// Renewals every 200 ms find the lock gone; 150 ms leases ran
			// out on a loaded machine before the test's last Unlock (CI36).
			c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
			name := redistest.Name(t)
			h := k.New(c, name)
			depth := lockDepth(t, k, h)
			require.NoError(t, rdb.Del(context.Background(), k.Key(name)).Err())
			select {
			case <-h.Lost():
			case <-time.After(2 * time.Second):
				t.Fatal("Lost did not fire after the lock was deleted")
			}
			checkOwed(t, s, k, h, name, depth)
		})
	})
	if !k.Reentrant {
		return
	}
	redistest.Subtest(t, "before-lost", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, s *redistest.Server) {
			ctx := testCtx(t)
			c, rdb := redistest.NewClient(t, s) // 30 s: the watchdog has not noticed
			name := redistest.Name(t)
			h := k.New(c, name)
			depth := lockDepth(t, k, h)
			require.NoError(t, rdb.Del(ctx, k.Key(name)).Err())
			assert.ErrorIs(t, h.Lock(ctx), relock.ErrNotHeld, "re-entry on a deleted lock")
			select {
			case <-h.Lost():
			default:
				t.Error("a refused re-entry did not fire Lost")
			}
			checkOwed(t, s, k, h, name, depth)
		})
	})
}

// lockDepth locks h once, or twice for a reentrant kind, and returns how
// many times.
func lockDepth(t *testing.T, k Kind, h Handle) int {
	t.Helper()
	ctx := testCtx(t)
	require.NoError(t, h.Lock(ctx))
	if !k.Reentrant {
		return 1
	}
	require.NoError(t, h.Lock(ctx))
	return 2
}

func checkOwed(t *testing.T, s *redistest.Server, k Kind, h Handle, name string, depth int) {
	t.Helper()
	ctx := testCtx(t)
	for i := 0; i < depth; i++ {
		assert.ErrorIs(t, h.Lock(ctx), relock.ErrNotHeld, "Lock with %d unlocks owed", depth-i)
		ok, err := h.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "TryLock with %d unlocks owed", depth-i)
		assert.False(t, ok)
		assert.Empty(t, s.Keys(t, k.Key(name)), "a lock refused after a loss took the lock")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld, "owed unlock %d of %d", i+1, depth)
	}
	assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld, "one unlock more than locked")

	// Paid: the handle starts a new, working hold.
	require.NoError(t, h.Lock(ctx), "Lock after the owed unlocks")
	assert.NotEmpty(t, s.Keys(t, k.Key(name)), "the new hold is not at Redis")
	require.NoError(t, h.Unlock(ctx))
}

// loseRenewals is a go-redis hook that, while on, sends the watchdog's
// renewals but reports them failed, as replies that were lost: a pipeline
// of renewals on a single server, each renewal command on a Cluster (see
// renewal).
type loseRenewals struct{ on atomic.Bool }

var errLostReply = errors.New("locktest: renewal reply lost")

func (l *loseRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *loseRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if l.on.Load() && renewal(cmd) {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}

func (l *loseRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if l.on.Load() && anyRenewal(cmds) {
			for _, c := range cmds {
				c.SetErr(errLostReply)
			}
			return errLostReply
		}
		return err
	}
}

// FenceAfterLocalLoss: the watchdog declares a hold lost because no
// renewal reply arrived, although the renewals were applied (the lock is
// still the owner's at Redis). Once its unlocks are paid, the handle's
// next Lock starts a new hold with a new, higher fencing token.
func FenceAfterLocalLoss(t *testing.T, k Kind) {
	if k.Mode == "read" {
		t.Skip("read holds have no fencing token")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		hook := &loseRenewals{}
		// Renewals every 333 ms: the new hold's lease of 300 ms lapsed
		// before its Unlock on a loaded machine.
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(time.Second))
		redistest.AddHook(rdb, hook)
		h := k.New(c, redistest.Name(t), relock.WithFencing())
		require.NoError(t, h.Lock(ctx))
		f1 := h.Fence()
		require.NotZero(t, f1)
		hook.on.Store(true)
		select {
		case <-h.Lost():
		case <-time.After(3 * time.Second):
			t.Fatal("the hold was not declared lost")
		}
		hook.on.Store(false)
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld, "the owed unlock")
		require.NoError(t, h.Lock(ctx))
		assert.Greater(t, h.Fence(), f1, "the new hold after a loss has no new fencing token")
		require.NoError(t, h.Unlock(ctx))
	})
}

// PartialReleaseResentLate: an Unlock of one of two holds whose reply was
// lost is resent after its request record expired (the record lives at
// most one lease); it must be applied once: the handle still holds the
// lock, and nobody else gets it (a review found the resend decremented
// again and handed the lock on).
func PartialReleaseResentLate(t *testing.T, k Kind) {
	if !k.Reentrant {
		t.Skip("not reentrant: no partial release")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		// Records live min(lease, 15 s): 1.2 s here, renewed holds (every
		// 400 ms; 300 and 600 ms leases lapsed on a loaded machine).
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(1200*time.Millisecond))
		faults := &redistest.Faults{}
		redistest.AddHook(rdb, faults)
		name := redistest.Name(t)
		h, other := k.New(c, name), k.waiter(c, name)
		require.NoError(t, h.Lock(ctx))
		require.NoError(t, h.Lock(ctx))
		faults.LoseReplies(true)
		require.ErrorIs(t, h.Unlock(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		time.Sleep(2400 * time.Millisecond) // the record expired; the hold is renewed
		require.NoError(t, h.Unlock(ctx), "the resent partial release")
		assert.True(t, h.Held(), "one hold is left")
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "another handle got the lock: the resent release was applied twice")
		require.NoError(t, h.Unlock(ctx))
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
	})
}

// FinalReleaseResentAfterRenewal: an Unlock whose reply was lost ran at
// Redis; a renewal then finds the lock gone (the release made it so)
// before the caller calls Unlock again. The second Unlock must resend the
// release, whose request record answers as the first run did, and return
// nil, as Unlock's doc promises (a chaos run found it returned ErrNotHeld).
func FinalReleaseResentAfterRenewal(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(time.Second))
		faults := &redistest.Faults{}
		redistest.AddHook(rdb, faults)
		name := redistest.Name(t)
		h := k.New(c, name)
		// A first cycle loads the scripts: a lost NOSCRIPT reply would
		// keep the release from running at all.
		require.NoError(t, h.Lock(ctx))
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, h.Lock(ctx))
		faults.LoseReplies(true)
		require.ErrorIs(t, h.Unlock(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		require.Zero(t, s.Admin(t).Exists(ctx, k.Key(name)).Val(), "the release did not run")
		// A renewal (every 333 ms) finds the lock gone; the release's
		// request record (1 s) is still there.
		time.Sleep(600 * time.Millisecond)
		require.NoError(t, h.Unlock(ctx), "the resent release, which Redis had applied")
		assert.False(t, h.Held())
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld, "one Unlock too many")
		other := k.New(c, name)
		require.NoError(t, other.Lock(ctx))
		require.NoError(t, other.Unlock(ctx))
	})
}

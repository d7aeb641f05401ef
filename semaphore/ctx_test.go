package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/semaphore"
)

func TestReleaseEndedCtx(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReleaseEndedCtx(t, sem1)
}

func TestReleaseUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReleaseUnreachable(t, sem1)
}

func TestSyncReplicasCtx(t *testing.T) {
	redistest.Parallel(t)
	locktest.SyncReplicasCtx(t, sem1)
}

func TestHoldContext(t *testing.T) {
	redistest.Parallel(t)
	locktest.HoldContext(t, sem1)
}

func TestHoldContextUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.HoldContextUnreachable(t, sem1)
}

func TestExtend(t *testing.T) {
	redistest.Parallel(t)
	locktest.Extend(t, sem1)
}

func TestExtendLateReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.ExtendLateReply(t, sem1)
}

// TestReentryLateReply: a handle that holds a permit acquires one more,
// and Redis's grant arrives after the hold was declared lost.
func TestReentryLateReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReentryLateReply(t, sem2)
}

func TestLockFor(t *testing.T) {
	redistest.Parallel(t)
	locktest.LockFor(t, sem1)
}

func TestTokens(t *testing.T) {
	redistest.Parallel(t)
	locktest.Tokens(t, sem1)
}

func TestResume(t *testing.T) {
	redistest.Parallel(t)
	locktest.Resume(t, sem1)
}

func TestGuarded(t *testing.T) {
	redistest.Parallel(t)
	locktest.Guarded(t, sem1)
}

func TestMetadata(t *testing.T) {
	redistest.Parallel(t)
	locktest.Metadata(t, sem1)
}

func TestRecordsSwept(t *testing.T) {
	redistest.Parallel(t)
	locktest.RecordsSwept(t, sem1)
}

// Alone (they count goroutines, or stall the shared servers).

func TestHoldContextGoroutines(t *testing.T) { locktest.HoldContextGoroutines(t, sem1) }

func TestDo(t *testing.T) { locktest.Do(t, sem1) }

func TestExtendStalled(t *testing.T) { locktest.ExtendStalled(t, sem1) }

func TestOutOfMemory(t *testing.T) { locktest.OutOfMemory(t, sem1) }

// TestPartialReleaseEndedCtx: a release of some of the handle's permits
// whose ctx has ended is still sent: the permit comes back at once, the
// others stay held and renewed.
func TestPartialReleaseEndedCtx(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s, relock.WithWatchdogTimeout(time.Second))
		name := redistest.Name(t)
		h, other := semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, h.Acquire(ctx, 3))
		ended, cancel := context.WithCancel(ctx)
		cancel()
		require.NoError(t, h.Release(ended, 1), "a partial release with an ended ctx")
		assert.Equal(t, 2, h.Held())
		assert.True(t, try(t, other, 1), "the released permit did not come back")
		assert.False(t, try(t, h, 1), "a permit too many")
		time.Sleep(1500 * time.Millisecond) // past a lease: the watchdog renews the two kept
		assert.NoError(t, h.LostErr(), "the kept permits were lost after a partial release with an ended ctx")
		require.NoError(t, h.Release(ended, 2))
		require.NoError(t, other.Release(ctx, 1))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestWaitUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitUnreachable(t, sem1)
}

// TestReentryShorterLease: a handle that holds a permit acquires one more
// with a shorter lease; its permits keep the longer one.
func TestReentryShorterLease(t *testing.T) {
	redistest.Parallel(t)
	k := sem2
	k.KeepsLonger = true
	locktest.ReentryShorterLease(t, k)
}

func TestStaleRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.StaleRenewal(t, sem1)
}

func TestObserverRelocks(t *testing.T) {
	redistest.Parallel(t)
	locktest.ObserverRelocks(t, sem1)
}

func TestRetriedReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.RetriedReply(t, sem1)
}

package rwlock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
)

func TestReleaseEndedCtx(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ReleaseEndedCtx)
}

func TestReleaseUnreachable(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ReleaseUnreachable)
}

func TestSyncReplicasCtx(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.SyncReplicasCtx)
}

func TestHoldContext(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.HoldContext)
}

func TestHoldContextUnreachable(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.HoldContextUnreachable)
}

func TestExtend(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.Extend)
}

func TestExtendLateReply(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ExtendLateReply)
}

func TestReentryLateReply(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ReentryLateReply)
}

func TestLockFor(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.LockFor)
}

func TestTokens(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.Tokens)
}

func TestResume(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.Resume)
}

func TestGuarded(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.Guarded)
}

func TestMetadata(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.Metadata)
}

func TestRecordsSwept(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.RecordsSwept)
}

// Alone (they count goroutines, or stall the shared servers).

func TestHoldContextGoroutines(t *testing.T) { sides(t, locktest.HoldContextGoroutines) }

func TestDo(t *testing.T) { sides(t, locktest.Do) }

func TestExtendStalled(t *testing.T) { sides(t, locktest.ExtendStalled) }

func TestOutOfMemory(t *testing.T) { sides(t, locktest.OutOfMemory) }

func TestWaitUnreachable(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.WaitUnreachable)
}

func TestReentryShorterLease(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ReentryShorterLease)
}

func TestStaleRenewal(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.StaleRenewal)
}

func TestObserverRelocks(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.ObserverRelocks)
}

func TestRetriedReply(t *testing.T) {
	redistest.Parallel(t)
	sides(t, locktest.RetriedReply)
}

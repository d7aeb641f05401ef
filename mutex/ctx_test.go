package mutex_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
)

func TestReleaseEndedCtx(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReleaseEndedCtx(t, kind)
}

func TestReleaseUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReleaseUnreachable(t, kind)
}

func TestSyncReplicasCtx(t *testing.T) {
	redistest.Parallel(t)
	locktest.SyncReplicasCtx(t, kind)
}

func TestHoldContext(t *testing.T) {
	redistest.Parallel(t)
	locktest.HoldContext(t, kind)
}

func TestHoldContextUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.HoldContextUnreachable(t, kind)
}

func TestExtend(t *testing.T) {
	redistest.Parallel(t)
	locktest.Extend(t, kind)
}

func TestExtendLateReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.ExtendLateReply(t, kind)
}

func TestLockFor(t *testing.T) {
	redistest.Parallel(t)
	locktest.LockFor(t, kind)
}

func TestTokens(t *testing.T) {
	redistest.Parallel(t)
	locktest.Tokens(t, kind)
}

func TestResume(t *testing.T) {
	redistest.Parallel(t)
	locktest.Resume(t, kind)
}

func TestGuarded(t *testing.T) {
	redistest.Parallel(t)
	locktest.Guarded(t, kind)
}

func TestMetadata(t *testing.T) {
	redistest.Parallel(t)
	locktest.Metadata(t, kind)
}

func TestRecordsSwept(t *testing.T) {
	redistest.Parallel(t)
	locktest.RecordsSwept(t, kind)
}

// Alone (they count goroutines, or stall the shared servers).

func TestHoldContextGoroutines(t *testing.T) { locktest.HoldContextGoroutines(t, kind) }

func TestDo(t *testing.T) { locktest.Do(t, kind) }

func TestExtendStalled(t *testing.T) { locktest.ExtendStalled(t, kind) }

func TestOutOfMemory(t *testing.T) { locktest.OutOfMemory(t, kind) }

func TestWaitUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitUnreachable(t, kind)
}

func TestStaleRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.StaleRenewal(t, kind)
}

func TestObserverRelocks(t *testing.T) {
	redistest.Parallel(t)
	locktest.ObserverRelocks(t, kind)
}

func TestRetriedReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.RetriedReply(t, kind)
}

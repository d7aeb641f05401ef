package semaphore_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
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

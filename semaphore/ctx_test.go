package semaphore_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { locktest.ReleaseEndedCtx(t, sem1) }

func TestReleaseUnreachable(t *testing.T) { locktest.ReleaseUnreachable(t, sem1) }

func TestSyncReplicasCtx(t *testing.T) { locktest.SyncReplicasCtx(t, sem1) }

func TestHoldContext(t *testing.T) { locktest.HoldContext(t, sem1) }

func TestHoldContextUnreachable(t *testing.T) { locktest.HoldContextUnreachable(t, sem1) }

func TestDo(t *testing.T) { locktest.Do(t, sem1) }

func TestExtend(t *testing.T) { locktest.Extend(t, sem1) }

func TestLockFor(t *testing.T) { locktest.LockFor(t, sem1) }

func TestTokens(t *testing.T) { locktest.Tokens(t, sem1) }

func TestResume(t *testing.T) { locktest.Resume(t, sem1) }

func TestGuarded(t *testing.T) { locktest.Guarded(t, sem1) }

func TestMetadata(t *testing.T) { locktest.Metadata(t, sem1) }

func TestRecordsSwept(t *testing.T) { locktest.RecordsSwept(t, sem1) }

func TestOutOfMemory(t *testing.T) { locktest.OutOfMemory(t, sem1) }

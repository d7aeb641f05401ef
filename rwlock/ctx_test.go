package rwlock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { sides(t, locktest.ReleaseEndedCtx) }

func TestReleaseUnreachable(t *testing.T) { sides(t, locktest.ReleaseUnreachable) }

func TestSyncReplicasCtx(t *testing.T) { sides(t, locktest.SyncReplicasCtx) }

func TestHoldContext(t *testing.T) { sides(t, locktest.HoldContext) }

func TestHoldContextUnreachable(t *testing.T) { sides(t, locktest.HoldContextUnreachable) }

func TestDo(t *testing.T) { sides(t, locktest.Do) }

func TestExtend(t *testing.T) { sides(t, locktest.Extend) }

func TestLockFor(t *testing.T) { sides(t, locktest.LockFor) }

func TestTokens(t *testing.T) { sides(t, locktest.Tokens) }

func TestResume(t *testing.T) { sides(t, locktest.Resume) }

func TestGuarded(t *testing.T) { sides(t, locktest.Guarded) }

func TestMetadata(t *testing.T) { sides(t, locktest.Metadata) }

func TestRecordsSwept(t *testing.T) { sides(t, locktest.RecordsSwept) }

func TestOutOfMemory(t *testing.T) { sides(t, locktest.OutOfMemory) }

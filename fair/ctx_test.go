package fair_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { locktest.ReleaseEndedCtx(t, kind) }

func TestReleaseUnreachable(t *testing.T) { locktest.ReleaseUnreachable(t, kind) }

func TestSyncReplicasCtx(t *testing.T) { locktest.SyncReplicasCtx(t, kind) }

func TestHoldContext(t *testing.T) { locktest.HoldContext(t, kind) }

func TestHoldContextUnreachable(t *testing.T) { locktest.HoldContextUnreachable(t, kind) }

func TestDo(t *testing.T) { locktest.Do(t, kind) }

func TestExtend(t *testing.T) { locktest.Extend(t, kind) }

func TestLockFor(t *testing.T) { locktest.LockFor(t, kind) }

func TestTokens(t *testing.T) { locktest.Tokens(t, kind) }

func TestResume(t *testing.T) { locktest.Resume(t, kind) }

func TestGuarded(t *testing.T) { locktest.Guarded(t, kind) }

func TestMetadata(t *testing.T) { locktest.Metadata(t, kind) }

func TestRecordsSwept(t *testing.T) { locktest.RecordsSwept(t, kind) }

func TestOutOfMemory(t *testing.T) { locktest.OutOfMemory(t, kind) }

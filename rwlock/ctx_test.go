package rwlock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { sides(t, locktest.ReleaseEndedCtx) }

func TestReleaseUnreachable(t *testing.T) { sides(t, locktest.ReleaseUnreachable) }

func TestSyncReplicasCtx(t *testing.T) { sides(t, locktest.SyncReplicasCtx) }

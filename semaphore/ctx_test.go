package semaphore_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { locktest.ReleaseEndedCtx(t, sem1) }

func TestReleaseUnreachable(t *testing.T) { locktest.ReleaseUnreachable(t, sem1) }

func TestSyncReplicasCtx(t *testing.T) { locktest.SyncReplicasCtx(t, sem1) }

package fair_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
)

func TestReleaseEndedCtx(t *testing.T) { locktest.ReleaseEndedCtx(t, kind) }

func TestReleaseUnreachable(t *testing.T) { locktest.ReleaseUnreachable(t, kind) }

func TestSyncReplicasCtx(t *testing.T) { locktest.SyncReplicasCtx(t, kind) }

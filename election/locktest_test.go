package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
)

// handle is an Election as the shared lock suites drive a lock: Lock is
// Campaign, Unlock is Resign. It has no TryLock or LockFor, so only the
// suites that use neither run on it: those of the grant machinery and of
// the hold that a leadership shares with the fair lock. (GrantToOtherCall
// does not apply: two Campaigns of one handle never wait at once.)
type handle struct{ *election.Election }

var errNoTry = errors.New("an election has no TryLock or LockFor")

func (h handle) Lock(ctx context.Context) error { return h.Campaign(ctx, "v") }

func (h handle) TryLock(context.Context) (bool, error) { return false, errNoTry }

func (h handle) Unlock(ctx context.Context) error { return h.Resign(ctx) }

func (h handle) Held() bool { return h.Leading() }

func (h handle) Fence() int64 { return h.Term() }

func (h handle) LockFor(context.Context, time.Duration) error { return errNoTry }

func (h handle) IsLocked(ctx context.Context) (bool, error) {
	_, err := h.Leader(ctx)
	if errors.Is(err, election.ErrNoLeader) {
		return false, nil
	}
	return err == nil, err
}

func (h handle) ForceUnlock(ctx context.Context) (bool, error) { return h.ForceResign(ctx) }

// Holders is the leader, as a lock's holder: its value is its metadata.
func (h handle) Holders(ctx context.Context) ([]relock.Holder, error) {
	l, err := h.Leader(ctx)
	if errors.Is(err, election.ErrNoLeader) {
		return []relock.Holder{}, nil
	}
	if err != nil {
		return nil, err
	}
	return []relock.Holder{{Fingerprint: l.Fingerprint, Metadata: l.Value, Count: 1}}, nil
}

// kind describes an election to the shared suites.
var kind = locktest.Kind{
	Grants: true,
	New: func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return handle{election.New(c, name, opts...)}
	},
	Key:   base,
	Type:  "election",
	Keeps: []string{":fence", ":log"},
	Tokens: func(ctx context.Context, rdb redis.UniversalClient, name string) []string {
		var toks []string
		for _, f := range rdb.HKeys(ctx, base(name)).Val() {
			switch f {
			case "fence", "wait", "fp", "value", "rev", "since":
			default:
				toks = append(toks, f)
			}
		}
		return toks
	},
}

func TestHandOff(t *testing.T) {
	redistest.Parallel(t)
	locktest.HandOff(t, kind)
}

func TestWaitSubscribed(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitSubscribed(t, kind)
}

func TestGrantLost(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantLost(t, kind)
}

func TestGrantToDeadWaiter(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantToDeadWaiter(t, kind)
}

func TestGrantThenGiveUp(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantThenGiveUp(t, kind)
}

func TestStaleGrant(t *testing.T) {
	redistest.Parallel(t)
	locktest.StaleGrant(t, kind)
}

func TestShortHeartbeatKeepsPlace(t *testing.T) {
	redistest.Parallel(t)
	locktest.ShortHeartbeatKeepsPlace(t, kind)
}

func TestHoldContextUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.HoldContextUnreachable(t, kind)
}

func TestReleaseUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.ReleaseUnreachable(t, kind)
}

func TestFinalReleaseResentAfterRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.FinalReleaseResentAfterRenewal(t, kind)
}

func TestClusterWakeUps(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterWakeUps(t, kind)
}

func TestClusterReshard(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReshard(t, kind)
}

func TestClusterReleaseMidMigration(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReleaseMidMigration(t, kind)
}

func TestGuarded(t *testing.T) {
	redistest.Parallel(t)
	locktest.Guarded(t, kind)
}

func TestExtendLateReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.ExtendLateReply(t, kind)
}

func TestWaitUnreachable(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitUnreachable(t, kind)
}

func TestRetriedReply(t *testing.T) {
	redistest.Parallel(t)
	locktest.RetriedReply(t, kind)
}

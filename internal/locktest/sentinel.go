package locktest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// SentinelFailover fails a master over under Redis Sentinel, with
// go-redis's failover client (redis.NewFailoverClient), and reproduces the
// window in which a failover lets two owners in: holds taken while the
// master's only replica was cut off (frozen, its link killed) never
// reached it. The master
// crashes, the replica thaws, the Sentinels promote it. The holds the
// replica had (half of them WithSyncReplicas) are kept: nobody else can
// take them, they are not lost, and their Unlock succeeds. The holds it
// lacked are free at the new master at once: another owner takes them
// while their holders still believe they hold them (the window), and the
// holders are told at their watchdog's next renewal (Lost fires, Unlock
// returns ErrNotHeld). While the replica is frozen, an acquire
// WithSyncReplicas fails with ErrNotReplicated.
func SentinelFailover(t *testing.T, k Kind) {
	g := redistest.StartSentinel(t)
	ctx := testCtx(t)
	// Outlasts the failover (about 2-3 s, 9 s if the first election
	// fails): the replicated holds' keys at the replica date from before it.
	const lease = 15 * time.Second
	c := relock.New(g.Client(t), relock.WithWatchdogTimeout(lease))
	other := relock.New(g.Client(t))
	t.Cleanup(func() { _ = c.Close(); _ = other.Close() })
	base := redistest.Name(t)

	type hold struct {
		name string
		h    Handle
	}
	take := func(n int, what string, opts ...relock.LockOption) []hold {
		var out []hold
		for i := 0; i < n; i++ {
			name := base + "." + what + "." + string(rune('a'+i))
			h := k.New(c, name, opts...)
			require.NoError(t, h.Lock(ctx), "Lock of %s", name)
			out = append(out, hold{name, h})
		}
		return out
	}
	replicated := append(take(3, "plain"), take(3, "synced", relock.WithSyncReplicas(1, 2*time.Second))...)
	// Everything written so far is at the replica once it confirms a
	// later write (WAIT counts the replication offset).
	conn := g.Master.Node(t).Conn()
	require.NoError(t, conn.Set(ctx, base+".mark", 1, time.Minute).Err())
	n, err := conn.Wait(ctx, 1, 2*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the replica never confirmed the holds")
	_ = conn.Close()

	// Frozen, the replica cannot reconnect after its link is cut; what
	// the master sent before is in the replica's socket buffer (a freeze
	// alone would not keep the next writes from it).
	require.NoError(t, g.Replica.Freeze())
	t.Cleanup(func() { _ = g.Replica.Thaw() })
	require.NoError(t, g.Master.Node(t).ClientKillByFilter(ctx, "TYPE", "replica").Err())
	unreplicated := take(4, "unreplicated")
	ok, err := k.New(c, base+".frozen", relock.WithSyncReplicas(1, 200*time.Millisecond)).TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotReplicated, "a synced acquire with the replica frozen")
	require.False(t, ok)

	crashed := time.Now()
	require.NoError(t, g.Master.Crash())
	require.NoError(t, g.Replica.Thaw())
	require.NoError(t, g.WaitMaster(ctx, g.Replica.Addr, 20*time.Second))
	promoted := time.Since(crashed)
	// The other Client's connections follow the new master.
	require.Eventually(t, func() bool {
		probe := k.New(other, base+".probe")
		ok, err := probe.TryLock(ctx)
		return err == nil && ok && probe.Unlock(ctx) == nil
	}, 10*time.Second, 50*time.Millisecond, "no lock at the new master")

	// The window: the locks the replica never had are free at the new
	// master, whatever their holders believe.
	twoOwners := 0
	var takers []Handle
	for _, x := range unreplicated {
		h := k.New(other, x.name)
		ok, err := h.TryLock(ctx)
		require.NoError(t, err, "TryLock of %s after the failover", x.name)
		require.True(t, ok, "%s: the promoted replica never had it, yet it is held", x.name)
		takers = append(takers, h)
		if x.h.Held() {
			twoOwners++
		}
	}
	// Their holders are told at their next renewal.
	for _, x := range unreplicated {
		select {
		case <-x.h.Lost():
		case <-time.After(lease / 2): // a renewal period and retries
			t.Fatalf("the holder of %s, taken by another owner, was never told", x.name)
		}
		assert.ErrorIs(t, x.h.LostErr(), relock.ErrNotHeld)
		assert.ErrorIs(t, x.h.Unlock(ctx), relock.ErrNotHeld, "Unlock of %s after Lost", x.name)
	}
	t.Logf("failed over in %v; %d of %d holds the replica lacked had two owners at once; their holders were told within %v of the crash (%v)",
		promoted.Round(time.Millisecond), twoOwners, len(unreplicated), time.Since(crashed).Round(time.Millisecond), unreplicated[0].h.LostErr())
	for _, h := range takers {
		require.NoError(t, h.Unlock(ctx))
	}

	// The holds the replica had are kept.
	for _, x := range replicated {
		ok, err := k.New(other, x.name).TryLock(ctx)
		require.NoError(t, err, "TryLock of %s after the failover", x.name)
		assert.False(t, ok, "another owner took %s, which the replica had", x.name)
		select {
		case <-x.h.Lost():
			t.Errorf("%s, which the replica had, was lost: %v", x.name, x.h.LostErr())
		default:
			assert.NoError(t, x.h.Unlock(ctx), "Unlock of %s", x.name)
		}
	}
}

package locktest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// masterWithReplica starts a master and one replica of it, of t's own,
// and returns a go-redis client on the master and the replica (to crash).
func masterWithReplica(t *testing.T) (*redis.Client, *redistest.Managed) {
	t.Helper()
	// No delay before the first sync (Redis waits 5 s for more replicas).
	master := redistest.StartManaged(t, "", "--repl-diskless-sync-delay", "0")
	host, port, err := net.SplitHostPort(master.Addr)
	require.NoError(t, err)
	replica := redistest.StartManaged(t, "", "--replicaof", host, port)
	rdb := master.Node(t)
	ctx := testCtx(t)
	require.Eventually(t, func() bool {
		info := rdb.Info(ctx, "replication").Val()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 20*time.Millisecond, "the replica never came online")
	// Right after its first sync a replica acknowledges late: wait until it
	// confirms a write.
	require.Eventually(t, func() bool {
		c := rdb.Conn()
		defer c.Close()
		c.Set(ctx, "relock-test:warm-up", 1, time.Minute)
		wait := redis.NewIntCmd(ctx, "WAIT", 1, 100)
		_ = c.Process(ctx, wait)
		return wait.Val() == 1
	}, 10*time.Second, time.Millisecond, "the replica never confirmed a write")
	return rdb, replica
}

// SyncReplicas checks relock.WithSyncReplicas on a real master with one
// replica: a hold waits for it; asking more replicas than there are, or
// with the replica gone, the acquire fails with ErrNotReplicated and
// leaves no lock; a held lock whose replica goes away is lost at its local
// deadline (renewals are no longer confirmed), and an Extend that no
// replica confirms ends with its ctx, keeps the sooner of its old
// deadline and its new lease, and gives the hold back if it was declared
// lost meanwhile.
func SyncReplicas(t *testing.T, k Kind) {
	redistest.RunReal(t, func(t *testing.T, _ *redistest.Server) {
		ctx := testCtx(t)
		rdb, replica := masterWithReplica(t)
		c := relock.New(rdb, relock.WithWatchdogTimeout(900*time.Millisecond))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		// The replica is a process of its own, which a loaded machine may
		// starve for more than 500 ms (election's TestSyncReplicas, CI43).
		// WAIT returns as soon as it confirms: a longer timeout costs
		// nothing when it is not starved.
		h := k.New(c, name, relock.WithSyncReplicas(1, 2*time.Second))
		require.NoError(t, h.Lock(ctx), "one replica, one asked")
		assert.True(t, h.Held())
		time.Sleep(time.Second) // renewals confirmed by the replica keep it
		assert.True(t, h.Held(), "a hold whose renewals the replica confirms was lost")
		require.NoError(t, h.Unlock(ctx))

		greedy := k.New(c, name, relock.WithSyncReplicas(2, 100*time.Millisecond))
		err := greedy.Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotReplicated, "two replicas asked, one there")
		ok, err := greedy.TryLock(ctx)
		assert.False(t, ok)
		assert.ErrorIs(t, err, relock.ErrNotReplicated)
		assert.Zero(t, rdb.Exists(ctx, k.Key(name)).Val(), "a lock the replicas did not confirm was left")

		// A WAIT longer than the client's read timeout gets its answer (1
		// of 2), not a read timeout.
		opts := *rdb.Options()
		opts.ReadTimeout = 200 * time.Millisecond
		slow := relock.New(redis.NewClient(&opts), relock.WithWatchdogTimeout(600*time.Millisecond))
		t.Cleanup(func() { _ = slow.Close() })
		greedy = k.New(slow, name, relock.WithSyncReplicas(2, 700*time.Millisecond))
		err = greedy.Lock(ctx)
		require.ErrorIs(t, err, relock.ErrNotReplicated)
		assert.Contains(t, err.Error(), "1 of 2 replicas confirmed", "the WAIT was cut short")

		// Held locks whose replica goes away: renewals no longer count, and
		// the watchdog's WAITs (900 ms) do not hold up the renewals of a
		// plain hold with a shorter lease (600 ms).
		require.NoError(t, h.Lock(ctx))
		synced := k.New(slow, name+".s", relock.WithSyncReplicas(1, 900*time.Millisecond))
		plain := k.New(slow, name+".p")
		require.NoError(t, synced.Lock(ctx))
		require.NoError(t, plain.Lock(ctx))
		fixed := k.New(c, name+".f", relock.WithSyncReplicas(1, 2*time.Second), relock.WithLease(time.Minute))
		require.NoError(t, fixed.Lock(ctx))
		late := k.New(c, name+".l", relock.WithSyncReplicas(1, 1500*time.Millisecond), relock.WithLease(6*time.Second))
		lateAt := time.Now()
		require.NoError(t, late.Lock(ctx))
		require.NoError(t, replica.Crash())
		crashed := time.Now()
		for _, l := range []Handle{h, synced} {
			select {
			case <-l.Lost():
				assert.ErrorIs(t, l.LostErr(), relock.ErrLeaseExpired)
			case <-time.After(5 * time.Second):
				t.Fatal("a hold whose renewals no replica confirms was not lost")
			}
		}
		time.Sleep(time.Until(crashed.Add(2 * time.Second)))
		assert.True(t, plain.Held(), "a plain hold was lost beside one whose renewals wait for replicas")
		require.NoError(t, plain.Unlock(ctx))
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)

		// An Extend whose replicas do not confirm stands at the master,
		// and ends with its ctx: cancelled (without a deadline) during
		// the WAIT, it returns the ctx's error at once, not "not
		// obtained"; given a deadline, it returns at the deadline; and a
		// shorter fixed lease is the hold's local deadline too.
		cctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		waits := waitCalls(t, rdb)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		err = fixed.Extend(cctx, 50*time.Second)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, relock.ErrNotObtained)
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "the Extend's WAIT outlasted its ctx")
		assert.Greater(t, waitCalls(t, rdb), waits, "the Extend sent no WAIT")
		assert.True(t, fixed.Held())
		dctx, stop := context.WithTimeout(ctx, 300*time.Millisecond)
		start = time.Now()
		err = fixed.Extend(dctx, time.Second)
		stop()
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "the Extend's WAIT outlasted its ctx's deadline")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, relock.ErrNotObtained)
		assert.LessOrEqual(t, rdb.PTTL(ctx, k.Key(name+".f")).Val(), time.Second, "the master did not apply it")
		select {
		case <-fixed.Lost():
			assert.ErrorIs(t, fixed.LostErr(), relock.ErrLeaseExpired)
		case <-time.After(3 * time.Second):
			t.Fatal("a hold whose lease Redis shortened to 1 s was still held after 3 s")
		}
		assert.False(t, fixed.Held())
		assert.ErrorIs(t, fixed.Unlock(ctx), relock.ErrNotHeld)

		// An Extend applied at the master while its hold's local deadline
		// passes (its 1.5 s WAIT for a replica that never confirms) is
		// given back, not left at Redis for the new lease.
		time.Sleep(time.Until(lateAt.Add(5 * time.Second)))
		waits = waitCalls(t, rdb)
		err = late.Extend(ctx, time.Minute)
		assert.Greater(t, waitCalls(t, rdb), waits, "the Extend was not sent (the hold was lost before it)")
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.Eventually(t, func() bool { return rdb.Exists(ctx, k.Key(name+".l")).Val() == 0 }, time.Second, 10*time.Millisecond,
			"an Extend applied while its hold was declared lost left the lock at Redis")

		// And a new acquire fails, leaving nothing.
		h2 := k.New(c, name+".2", relock.WithSyncReplicas(1, 100*time.Millisecond))
		assert.ErrorIs(t, h2.Lock(ctx), relock.ErrNotReplicated, "the replica is gone")
		assert.Zero(t, rdb.Exists(ctx, k.Key(name+".2")).Val(), "a lock the replicas did not confirm was left")
	})
}

// SyncReplicasCtx: the WAIT of an acquire WithSyncReplicas is bounded by
// what the caller's ctx has left. With replicas that do not confirm (a
// server without replicas, or more asked than a Cluster master has), a
// Lock or TryLock with a 200 ms ctx returns its ctx's error soon after
// the deadline, not ErrNotReplicated after the whole WAIT timeout (it
// waited 8 s), and leaves no lock; so does a Lock whose ctx, without a
// deadline, is cancelled during the WAIT.
func SyncReplicasCtx(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		if !s.Real() {
			t.Skip("miniredis has no WAIT")
		}
		c, rdb := redistest.NewClient(t, s)
		name := redistest.Name(t)
		replicas := 1
		if s.Cluster != nil {
			replicas = 2 // each master has one
		}
		h := k.New(c, name, relock.WithSyncReplicas(replicas, 8*time.Second))
		for what, acquire := range map[string]func(context.Context) error{
			"Lock": h.Lock,
			"TryLock": func(ctx context.Context) error {
				_, err := h.TryLock(ctx)
				return err
			},
		} {
			ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
			start := time.Now()
			err := acquire(ctx)
			took := time.Since(start)
			cancel()
			assert.ErrorIs(t, err, context.DeadlineExceeded, "%s: the ctx's error", what)
			assert.ErrorIs(t, err, relock.ErrNotObtained, what)
			assert.NotErrorIs(t, err, relock.ErrNotReplicated, what)
			assert.Less(t, took, 2*time.Second, "%s: the WAIT outlasted the ctx", what)
			assert.False(t, h.Held(), what)
			assert.Zero(t, rdb.Exists(testCtx(t), k.Key(name)).Val(), "%s: a lock was left", what)
		}

		// A ctx without a deadline, cancelled during the WAIT: the
		// acquire returns soon after (it waited the whole WAIT timeout).
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		waits := waitCalls(t, rdb)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		err := h.Lock(ctx)
		took := time.Since(start)
		cancel()
		assert.Greater(t, waitCalls(t, rdb), waits, "cancelled: no WAIT was sent")
		assert.ErrorIs(t, err, context.Canceled, "cancelled: the ctx's error")
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.NotErrorIs(t, err, relock.ErrNotReplicated)
		assert.Less(t, took, 2*time.Second, "cancelled: the WAIT outlasted the ctx")
		assert.False(t, h.Held())
		assert.Zero(t, rdb.Exists(testCtx(t), k.Key(name)).Val(), "cancelled: a lock was left")
	})
}

// waitCalls is how many WAITs rdb's masters have run (INFO
// commandstats): a WAIT is counted once it returned.
func waitCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	var (
		mu    sync.Mutex
		calls int64
	)
	count := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		_, stat, _ := strings.Cut(info, "cmdstat_wait:calls=")
		stat, _, _ = strings.Cut(stat, ",")
		n, _ := strconv.ParseInt(stat, 10, 64)
		mu.Lock()
		calls += n
		mu.Unlock()
		return nil
	}
	ctx := testCtx(t)
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, count)
	} else {
		err = count(ctx, rdb.(*redis.Client))
	}
	require.NoError(t, err)
	return calls
}

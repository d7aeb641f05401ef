package reentrant_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("RELOCK_TEST_HOLDER"); spec != "" {
		holdForever(spec) // the child process of TestKilledHolder
		return
	}
	os.Exit(redistest.MainCluster(m))
}

var newClient = redistest.NewClient

func key(name string) string { return "relock:reentrant:{" + name + "}" }

func holdCount(t *testing.T, l *reentrant.Lock) int {
	t.Helper()
	n, err := l.HoldCount(context.Background())
	require.NoError(t, err)
	return n
}

func TestLockUnlockTwice(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		l := reentrant.New(c, redistest.Name(t))
		for i := 0; i < 2; i++ {
			require.NoError(t, l.Lock(ctx))
			assert.Equal(t, 1, holdCount(t, l))
			require.NoError(t, l.Unlock(ctx))
			assert.Equal(t, 0, holdCount(t, l))
		}
		assert.Empty(t, s.Keys(t, key(l.Name())))
	})
}

func TestReentrancy(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		c2, _ := newClient(t, s)
		name := redistest.Name(t)
		a, b, far := reentrant.New(c, name), reentrant.New(c, name), reentrant.New(c2, name)

		require.NoError(t, a.Lock(ctx))
		ok, err := a.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "re-entry by TryLock")
		assert.Equal(t, 2, holdCount(t, a))
		assert.Equal(t, 0, holdCount(t, b), "another handle's hold count")

		for _, other := range []*reentrant.Lock{b, far} {
			ok, err := other.TryLock(ctx)
			require.NoError(t, err)
			assert.False(t, ok, "another handle got a held lock")
			locked, err := other.IsLocked(ctx)
			require.NoError(t, err)
			assert.True(t, locked, "is-locked from another handle")
			assert.ErrorIs(t, other.Unlock(ctx), relock.ErrNotHeld, "foreign unlock")
		}
		assert.Equal(t, 2, holdCount(t, a), "a foreign unlock changed the count")

		require.NoError(t, a.Unlock(ctx))
		assert.Equal(t, 1, holdCount(t, a))
		ok, err = far.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "lock free after a partial unlock")

		require.NoError(t, a.Unlock(ctx))
		assert.Equal(t, 0, holdCount(t, a))
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld, "unlock past zero")
		locked, err := b.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
		ok, err = far.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, far.Unlock(ctx))
	})
}

func TestWaiterGetsLockAfterLastUnlock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a, b := reentrant.New(c, name), reentrant.New(c, name)
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		require.NoError(t, a.Unlock(ctx))
		select {
		case err := <-got:
			t.Fatalf("waiter returned (%v) while the lock was still held once", err)
		case <-time.After(200 * time.Millisecond):
		}
		require.NoError(t, a.Unlock(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("waiter not admitted after the final unlock")
		}
		assert.Equal(t, 1, holdCount(t, b))
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestForceUnlock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond)) // renewed every 200 ms
		name := redistest.Name(t)
		a, b, op := reentrant.New(c, name), reentrant.New(c, name), reentrant.New(c, name)
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		time.Sleep(50 * time.Millisecond)

		deleted, err := op.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, deleted)
		select {
		case err := <-got:
			require.NoError(t, err, "waiter after force-unlock")
		case <-time.After(2 * time.Second):
			t.Fatal("force-unlock did not wake the waiter")
		}
		select {
		case <-a.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("the former holder was not told it lost the lock")
		}
		assert.ErrorIs(t, a.LostErr(), relock.ErrLockGone, "a renewal found the lock gone")
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		assert.Equal(t, 1, holdCount(t, b), "the former holder's unlock touched the new owner")
		require.NoError(t, b.Unlock(ctx))
		deleted, err = op.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.False(t, deleted)
	})
}

func TestFixedLeaseExpires(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// The 2 s lease, scaled to 400 ms.
		ctx := context.Background()
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a := reentrant.New(c, name, relock.WithLease(400*time.Millisecond))
		b := reentrant.New(c, name)
		require.NoError(t, a.Lock(ctx))
		start := time.Now()
		require.NoError(t, b.Lock(ctx))
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, 350*time.Millisecond, "got in before the lease ran out")
		assert.Less(t, waited, 1200*time.Millisecond, "took much longer than the lease")
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld, "stale unlock")
		assert.Equal(t, 1, holdCount(t, b))
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestLeaseResetOnReentry(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// Lock with a 10 s lease three times, unlock twice: the lease is
		// still between 9 and 10 s.
		ctx := context.Background()
		c, _ := newClient(t, s)
		l := reentrant.New(c, redistest.Name(t), relock.WithLease(10*time.Second))
		for i := 0; i < 3; i++ {
			require.NoError(t, l.Lock(ctx))
		}
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		ttl, err := l.RemainingLease(ctx)
		require.NoError(t, err)
		assert.Greater(t, ttl, 9*time.Second)
		assert.LessOrEqual(t, ttl, 10*time.Second)
		assert.Equal(t, 1, holdCount(t, l))
		require.NoError(t, l.Unlock(ctx))
		ttl, err = l.RemainingLease(ctx)
		require.NoError(t, err)
		assert.Zero(t, ttl)
	})
}

func TestWatchdogKeepsReenteredLockAlive(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		// Renewed every 200 ms (200 and 400 ms leases were too short for a
		// loaded machine).
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		a, b := reentrant.New(c, name), reentrant.New(c, name)
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, a.Lock(ctx))
		time.Sleep(1800 * time.Millisecond) // 3 leases
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "re-entered lock expired under the watchdog")
		assert.Equal(t, 2, holdCount(t, a))
		require.NoError(t, a.Unlock(ctx))
		time.Sleep(1200 * time.Millisecond) // 2 leases
		assert.Equal(t, 1, holdCount(t, a), "partial unlock stopped the renewal")
		require.NoError(t, a.Unlock(ctx))

		// A renewal round that began before the Unlock may still be on its
		// way (it finds the hold gone): a period (200 ms) later, nothing.
		time.Sleep(250 * time.Millisecond)
		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		time.Sleep(300 * time.Millisecond)
		assert.Zero(t, counter.Commands(), "renewals after the final unlock: %v", counter.Names())
	})
}

func TestNoRenewalAfterFinalUnlock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A 90 ms watchdog renews every 30 ms, and the cycles go on for
		// seven leases (20 renewals or more), so renewals are in flight
		// around many of the unlocks below; none may revive the lock.
		// (A 30 ms lease, renewed every 10 ms, lapsed on a loaded machine
		// before a renewal was confirmed.) miniredis runs Lua far slower
		// (a first call parses the script, tens of ms under -race), and a
		// cluster client's first renewals load the cluster's state: 150 ms
		// there.
		ctx := context.Background()
		lease := 90 * time.Millisecond
		if !s.Real() || s.Cluster != nil {
			lease = 150 * time.Millisecond
		}
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		l := reentrant.New(c, name)
		start := time.Now()
		for i := 0; i < 100 || time.Since(start) < 7*lease; i++ {
			require.NoError(t, l.Lock(ctx))
			require.NoError(t, l.Lock(ctx))
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, l.Unlock(ctx))
			n, err := rdb.Exists(ctx, key(name)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "lock exists after the final unlock (cycle %d)", i)
		}
	})
}

func TestCrashedHolderClientClosed(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const lease = 300 * time.Millisecond
		crashed := relock.New(s.Client(t), relock.WithWatchdogTimeout(lease))
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		require.NoError(t, reentrant.New(crashed, name).Lock(ctx))
		start := time.Now()
		require.NoError(t, crashed.Close()) // no unlock: the holder "crashes"
		require.NoError(t, reentrant.New(c, name).Lock(ctx))
		assert.Less(t, time.Since(start), lease+300*time.Millisecond, "freed later than one lease")
	})
}

func TestKilledHolder(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		s.SingleOnly(t, "the holder process connects to one address")
		const lease = 500 * time.Millisecond
		name := redistest.Name(t)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("RELOCK_TEST_HOLDER=%s|%s|%s", s.Addr, name, lease))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "locked\n", line)

		c, _ := newClient(t, s)
		l := reentrant.New(c, name)
		time.Sleep(2 * lease) // the child's watchdog keeps it held
		ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the live child's lock was not kept alive")

		require.NoError(t, cmd.Process.Kill()) // SIGKILL: no unlock, no Close
		start := time.Now()
		require.NoError(t, l.Lock(ctx))
		assert.Less(t, time.Since(start), lease+300*time.Millisecond, "freed later than one lease after the kill")
		require.NoError(t, l.Unlock(ctx))
	})
}

// holdForever is the child process of TestKilledHolder: it takes the lock
// with a short watchdog lease, says so, and waits to be killed.
func holdForever(spec string) {
	parts := strings.Split(spec, "|")
	lease, err := time.ParseDuration(parts[2])
	if err != nil {
		panic(err)
	}
	c := relock.New(redis.NewClient(&redis.Options{Addr: parts[0]}), relock.WithWatchdogTimeout(lease))
	if err := reentrant.New(c, parts[1]).Lock(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	select {}
}

func TestConcurrentCounter(t *testing.T) {
	redistest.Exclusive(t, "16 contenders keep a core busy: they would starve the timing tests beside it")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		name := redistest.Name(t)
		const handles = 16
		cycles := 100
		if !s.Real() {
			// miniredis runs the scripts about 7 times slower: 16
			// contenders on one lock (6 s of CPU for 100 cycles each).
			cycles = 30
		}
		clients := []*relock.Client{}
		for i := 0; i < 2; i++ {
			c, _ := newClient(t, s)
			clients = append(clients, c)
		}
		counter := 0 // guarded by the lock only
		var wg sync.WaitGroup
		for i := 0; i < handles; i++ {
			l := reentrant.New(clients[i%len(clients)], name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < cycles; k++ {
					if err := l.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					v := counter
					counter = v + 1
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, handles*cycles, counter)
	})
}

func TestReplayedScriptsCountOnce(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		replay := &redistest.Replay{}
		c, rdb := redistest.NewClient(t, s)
		redistest.AddHook(rdb, replay)
		l := reentrant.New(c, redistest.Name(t))
		replay.Enable(true)
		for i := 1; i <= 3; i++ {
			require.NoError(t, l.Lock(ctx))
			assert.Equal(t, i, holdCount(t, l), "hold count after %d replayed locks", i)
		}
		for i := 2; i >= 0; i-- {
			require.NoError(t, l.Unlock(ctx), "a replayed unlock must not fail")
			assert.Equal(t, i, holdCount(t, l))
		}
		replay.Enable(false)
		assert.Positive(t, replay.Replays.Load())
	})
}

func TestStalledServerCountsOnce(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := redistest.StallClient(t, s)
		admin := s.Client(t)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		l := reentrant.New(c, redistest.Name(t))
		calls := redistest.ScriptCalls(t, admin)
		for i := 1; i <= 2; i++ {
			require.NoError(t, rdb.Ping(ctx).Err()) // a stall during a dial is not retried
			redistest.Stall(t, admin, 200*time.Millisecond)
			require.NoError(t, l.Lock(ctx), "lock across a stall")
			assert.Equal(t, i, holdCount(t, l))
		}
		require.NoError(t, rdb.Ping(ctx).Err())
		redistest.Stall(t, admin, 200*time.Millisecond)
		require.NoError(t, l.Unlock(ctx), "unlock across a stall")
		assert.Equal(t, 1, holdCount(t, l))
		assert.GreaterOrEqual(t, redistest.ScriptCalls(t, admin)-calls, int64(6),
			"the stall did not make the scripts run more than once")
		require.NoError(t, l.Unlock(ctx))
	})
}

func TestFencingSameForReentry(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a := reentrant.New(c, name, relock.WithFencing())
		b := reentrant.New(c, name, relock.WithFencing())
		require.NoError(t, a.Lock(ctx))
		f := a.Fence()
		require.NoError(t, a.Lock(ctx))
		assert.Equal(t, f, a.Fence(), "re-entry changed the fencing token")
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, b.Lock(ctx))
		assert.Greater(t, b.Fence(), f)
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	c := relock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	defer c.Close()
	for _, tc := range []struct {
		l    *reentrant.Lock
		want error
	}{
		{reentrant.New(c, ""), relock.ErrInvalidName},
		{reentrant.New(c, "x", relock.WithLease(time.Microsecond)), relock.ErrInvalidOption},
		{reentrant.New(nil, "x"), relock.ErrNilClient},
	} {
		assert.ErrorIs(t, tc.l.Lock(ctx), tc.want)
		_, err := tc.l.HoldCount(ctx)
		assert.ErrorIs(t, err, tc.want)
		_, err = tc.l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, tc.want)
		assert.ErrorIs(t, tc.l.Unlock(ctx), tc.want)
	}
}

func TestLostUnlockReplyThenLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// An Unlock is applied but its reply is lost; the handle then locks
		// again before retrying the Unlock. The pending Unlock must be
		// settled once, not lost and not applied twice.
		ctx := context.Background()
		faults := &redistest.Faults{}
		c, rdb := redistest.NewClient(t, s)
		redistest.AddHook(rdb, faults)
		l := reentrant.New(c, redistest.Name(t))
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(ctx))
		faults.LoseReplies(true)
		require.ErrorIs(t, l.Unlock(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		require.NoError(t, l.Lock(ctx))
		assert.Equal(t, 2, holdCount(t, l), "2 locks, 1 unlock, 1 lock")
		require.NoError(t, l.Unlock(ctx))
		assert.Equal(t, 1, holdCount(t, l))
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		require.NoError(t, l.Unlock(ctx))
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
	})
}

// kind describes the reentrant lock to the tests every lock type shares.
var kind = locktest.Kind{
	Grants:  true,
	Starves: true,
	New: func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return reentrant.New(c, name, opts...)
	},
	Key:       key,
	Reentrant: true,
	Type:      "reentrant",
	Tokens: func(ctx context.Context, rdb redis.UniversalClient, name string) []string {
		return rdb.HKeys(ctx, key(name)).Val()
	},
}

func TestLostHoldRefusesLock(t *testing.T) {
	redistest.Parallel(t)
	locktest.LostHoldRefusesLock(t, kind)
}

func TestOperator(t *testing.T) {
	redistest.Parallel(t)
	locktest.Operator(t, kind)
}

func TestForceUnlockResent(t *testing.T) {
	redistest.Parallel(t)
	locktest.ForceUnlockResent(t, kind)
}

func TestEvents(t *testing.T) {
	redistest.Parallel(t)
	locktest.Events(t, kind)
}

func TestObserverPanics(t *testing.T) {
	redistest.Parallel(t)
	locktest.ObserverPanics(t, kind)
}

func TestFenceAfterLocalLoss(t *testing.T) {
	redistest.Parallel(t)
	locktest.FenceAfterLocalLoss(t, kind)
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

func TestGrantToOtherCall(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantToOtherCall(t, kind)
}

func TestStaleGrant(t *testing.T) {
	redistest.Parallel(t)
	locktest.StaleGrant(t, kind)
}

func TestShortHeartbeatKeepsPlace(t *testing.T) {
	redistest.Parallel(t)
	locktest.ShortHeartbeatKeepsPlace(t, kind)
}

func TestWaitBoundedByLease(t *testing.T) {
	locktest.WaitBoundedByLease(t, kind)
}

func TestWaitLastMillisecond(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitLastMillisecond(t, kind)
}

func TestWaitExpiryMidScript(t *testing.T) {
	locktest.WaitExpiryMidScript(t, kind)
}

func TestSyncReplicas(t *testing.T) {
	redistest.Parallel(t)
	locktest.SyncReplicas(t, kind)
}

func TestPartialReleaseResentLate(t *testing.T) {
	redistest.Parallel(t)
	locktest.PartialReleaseResentLate(t, kind)
}

// TestACL runs the shared behaviours as a Redis user with exactly the
// documented ACL rules (redistest.ACLRules).
func TestACL(t *testing.T) {
	redistest.Parallel(t)
	locktest.ACL(t, kind)
}

func TestClusterNames(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterNames(t, kind)
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

func TestFinalReleaseResentAfterRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.FinalReleaseResentAfterRenewal(t, kind)
}

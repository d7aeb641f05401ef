package mutex_test

import (
	"context"
	"errors"
	"os"
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
	"github.com/relock-go/relock/mutex"
)

func TestMain(m *testing.M) { os.Exit(redistest.MainCluster(m)) }

var newClient = redistest.NewClient

func TestLockUnlock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a, b := mutex.New(c, name), mutex.New(c, name)

		require.NoError(t, a.Lock(ctx))
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "second handle got a held mutex")

		err = a.Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrAlreadyHeld, "relock by the holder must fail at once")

		err = b.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "unlock by a non-holder")
		require.NoError(t, a.Unlock(ctx))
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld, "second unlock")

		ok, err = b.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, b.Unlock(ctx))
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "lock key left after release")
	})
}

func TestMutualExclusion(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		name := redistest.Name(t)
		const clients, handles, cycles = 3, 4, 25
		counter, inside := 0, 0 // deliberately not atomic: the lock guards them
		var violations int
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			c, _ := newClient(t, s)
			for j := 0; j < handles; j++ {
				m := mutex.New(c, name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < cycles; k++ {
						if err := m.Lock(ctx); err != nil {
							t.Error(err)
							return
						}
						inside++
						if inside != 1 {
							violations++
						}
						v := counter
						time.Sleep(100 * time.Microsecond)
						counter = v + 1
						inside--
						if err := m.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		assert.Equal(t, clients*handles*cycles, counter)
		assert.Zero(t, violations)
	})
}

func TestLeaseExpiryFreesLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a := mutex.New(c, name, relock.WithLease(200*time.Millisecond))
		b := mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))

		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, b.Lock(wctx), "lock after the holder's lease ran out")
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "acquired before the lease ran out")

		select {
		case <-a.Lost():
		case <-time.After(time.Second):
			t.Fatal("Lost did not fire after the fixed lease ran out")
		}
		assert.ErrorIs(t, a.LostErr(), relock.ErrLeaseExpired)
		err := a.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "stale unlock")
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "the stale unlock released the new owner's lock")
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestWatchdogKeepsLockAlive(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond)) // 300 ms lapsed on a loaded machine
		name := redistest.Name(t)
		a, b := mutex.New(c, name), mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		time.Sleep(1200 * time.Millisecond) // 2 leases
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "lock expired while held under the watchdog")
		select {
		case <-a.Lost():
			t.Fatal("Lost fired while the watchdog renewed the lock")
		default:
		}
		require.NoError(t, a.Unlock(ctx))

		// No renewal after Unlock, for more than a lease: the key stays
		// gone (the release's request record swept) and nothing is sent.
		// A renewal round that began before the Unlock may still be on
		// its way (it can only extend the owner's own hold, and finds it
		// gone): a period (200 ms) later, nothing.
		time.Sleep(200 * time.Millisecond)
		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		time.Sleep(700 * time.Millisecond)
		assert.Zero(t, counter.Commands(), "commands sent after Unlock: %v", counter.Names())
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}*"))
	})
}

func TestLostWhenKeyDeleted(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond)) // renewed every 200 ms
		name := redistest.Name(t)
		a := mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, rdb.Del(ctx, "relock:mutex:{"+name+"}").Err())
		select {
		case <-a.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("Lost did not fire after the key was deleted")
		}
		assert.ErrorIs(t, a.LostErr(), relock.ErrLockGone, "a renewal found the key gone")
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "the watchdog recreated a deleted lock")

		// Someone else takes it; the lost holder must not extend or delete it.
		b := mutex.New(c, name)
		require.NoError(t, b.Lock(ctx))
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestCancelledLockLeavesNothing(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		a, b := mutex.New(c, name), mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		// A wait opens the Client's subscription connection, which stays.
		redistest.Subscribed(t, b.Lock)
		redistest.CheckGoroutines(t)

		wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		err := b.Lock(wctx)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		require.NoError(t, a.Unlock(ctx))
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "lock key left behind")
		if s.Real() {
			assert.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, "relock:mutex:{"+name+"}").Result()
				return err == nil && n["relock:mutex:{"+name+"}"] == 0
			}, 2*time.Second, 10*time.Millisecond, "subscription left behind")
		}
	})
}

func TestCancelDuringAcquireReleasesIt(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		// The acquire reaches Redis but its reply arrives after ctx ended:
		// the lock it took must be given back.
		ctx := context.Background()
		c, _ := newClient(t, s)
		admin := s.Client(t)
		name := redistest.Name(t)
		a := mutex.New(c, name)
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err())
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err := a.Lock(wctx)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		time.Sleep(400 * time.Millisecond)
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "an acquire that landed after ctx ended kept the lock")
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

func TestScriptFlush(t *testing.T) {
	redistest.Exclusive(t, "SCRIPT FLUSH makes every client of the server reload its scripts")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		a := mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		// Longer than a lease: the hold survives only if renewals reloaded
		// the script. (A 150 ms lease is too short for a loaded machine.)
		time.Sleep(900 * time.Millisecond)
		select {
		case <-a.Lost():
			t.Fatal("hold lost after SCRIPT FLUSH")
		default:
		}
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, a.Unlock(ctx))
	})
}

func TestTwoCommandsPerCycle(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := newClient(t, s)
		m := mutex.New(c, redistest.Name(t))
		require.NoError(t, m.Lock(ctx)) // loads the scripts
		require.NoError(t, m.Unlock(ctx))

		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		const cycles = 50
		for i := 0; i < cycles; i++ {
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Unlock(ctx))
		}
		assert.Equal(t, int64(2*cycles), counter.Commands(), "commands for %d uncontended cycles", cycles)

		// relock.Do, and the hold's context, add none.
		counter.Reset()
		for i := 0; i < cycles; i++ {
			require.NoError(t, relock.Do(ctx, m, func(ctx context.Context) error { return ctx.Err() }))
		}
		assert.Equal(t, int64(2*cycles), counter.Commands(), "commands for %d uncontended cycles of Do", cycles)
	})
}

func TestCloseLeaksNoGoroutine(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		redistest.CheckGoroutines(t)
		c := relock.New(rdb)
		name := redistest.Name(t)
		a, b := mutex.New(c, name), mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		done := make(chan error, 1)
		go func() { done <- b.Lock(ctx) }()
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, c.Close())
		err := <-done
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.ErrorIs(t, err, relock.ErrClosed)
		select {
		case <-a.Lost():
		default:
			t.Error("Close did not fire Lost of a held lock")
		}
		err = a.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, a.Lock(ctx), relock.ErrClosed)
	})
}

func TestFencingIncreases(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		name := redistest.Name(t)
		var last int64
		for i := 0; i < 3; i++ {
			c, _ := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
			for j := 0; j < 3; j++ {
				m := mutex.New(c, name, relock.WithFencing())
				assert.Zero(t, m.Fence(), "fence before lock")
				require.NoError(t, m.Lock(ctx))
				f := m.Fence()
				assert.Greater(t, f, last, "fencing token did not increase")
				last = f
				require.NoError(t, m.Unlock(ctx))
				assert.Zero(t, m.Fence(), "fence after unlock")
			}
		}
		time.Sleep(700 * time.Millisecond) // request records live at most one lease
		assert.Equal(t, []string{"relock:mutex:{" + name + "}:fence"}, s.Keys(t, "relock:mutex:{"+name+"}*"),
			"only the fencing counter may stay")
	})
}

func TestRetriedScriptsAreIdempotent(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		replay := &redistest.Replay{}
		c, rdb := redistest.NewClient(t, s)
		redistest.AddHook(rdb, replay)
		name := redistest.Name(t)
		a := mutex.New(c, name, relock.WithFencing())
		replay.Enable(true)
		require.NoError(t, a.Lock(ctx), "a replayed acquire must still succeed")
		f := a.Fence()
		require.NoError(t, a.Unlock(ctx), "a replayed release must not report not-held")
		require.NoError(t, a.Lock(ctx))
		assert.Equal(t, f+1, a.Fence(), "a replayed acquire drew two fencing tokens")
		require.NoError(t, a.Unlock(ctx))
		replay.Enable(false)
		assert.Positive(t, replay.Replays.Load())
	})
}

func TestStalledServerRetries(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		// The server stalls past the client's read timeout: go-redis resends
		// the script, and both copies run when the server wakes up.
		ctx := context.Background()
		rdb := redistest.StallClient(t, s)
		admin := s.Client(t)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		a := mutex.New(c, name)

		require.NoError(t, rdb.Ping(ctx).Err()) // a stall during a dial is not retried
		calls := redistest.CommandCalls(t, admin, "evalsha", "eval", "fcall", "set")
		redistest.Stall(t, admin, 200*time.Millisecond)
		require.NoError(t, a.Lock(ctx), "acquire across a stall")
		require.NoError(t, rdb.Ping(ctx).Err())
		redistest.Stall(t, admin, 200*time.Millisecond)
		require.NoError(t, a.Unlock(ctx), "release across a stall")
		assert.GreaterOrEqual(t, redistest.CommandCalls(t, admin, "evalsha", "eval", "fcall", "set")-calls, int64(4),
			"the stall did not make the scripts run more than once")
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"))
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

func TestWakeUpIsPushed(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := newClient(t, s)
		waiterRDB := s.Client(t)
		counter := &redistest.Counter{}
		redistest.AddHook(waiterRDB, counter)
		wc := relock.New(waiterRDB)
		t.Cleanup(func() { _ = wc.Close() })
		name := redistest.Name(t)
		a, b := mutex.New(c, name), mutex.New(wc, name)
		require.NoError(t, a.Lock(ctx)) // watchdog lease: 30 s
		got := make(chan time.Time, 1)
		go func() {
			if err := b.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		time.Sleep(300 * time.Millisecond)
		released := time.Now()
		require.NoError(t, a.Unlock(ctx))
		acquired := <-got
		// A timer-driven waiter would wait about core.MaxWait (1 s).
		assert.Less(t, acquired.Sub(released), 500*time.Millisecond, "hand-off was not pushed")
		require.NoError(t, b.Unlock(ctx))
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	s := &redistest.Server{Addr: "127.0.0.1:1"} // never dialled: input is checked first
	rdb := s.Client(t)
	c := relock.New(rdb)
	defer c.Close()
	cases := []struct {
		name string
		m    *mutex.Mutex
		want error
	}{
		{"empty name", mutex.New(c, ""), relock.ErrInvalidName},
		{"brace first", mutex.New(c, "}x"), relock.ErrInvalidName},
		{"oversized name", mutex.New(c, strings.Repeat("n", 1025)), relock.ErrInvalidName},
		{"zero lease", mutex.New(c, "x", relock.WithLease(0)), relock.ErrInvalidOption},
		{"negative lease", mutex.New(c, "x", relock.WithLease(-time.Second)), relock.ErrInvalidOption},
		{"absurd lease", mutex.New(c, "x", relock.WithLease(365*24*time.Hour)), relock.ErrInvalidOption},
		{"nil client", mutex.New(nil, "x"), relock.ErrNilClient},
		{"nil redis", mutex.New(relock.New(nil), "x"), relock.ErrNilClient},
		{"typed nil redis", mutex.New(relock.New((*redis.Client)(nil)), "x"), relock.ErrNilClient},
		{"bad watchdog", mutex.New(relock.New(rdb, relock.WithWatchdogTimeout(time.Nanosecond)), "x"), relock.ErrInvalidOption},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.m.Lock(ctx), tc.want)
			_, err := tc.m.TryLock(ctx)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, tc.m.Unlock(ctx), tc.want)
		})
	}
	// Names with braces inside are fine (the tag is cut at the first '}').
	assert.False(t, errors.Is(mutex.New(c, "a}b{c").Unlock(ctx), relock.ErrInvalidName))
}

// kind describes the mutex to the tests every lock type shares.
var kind = locktest.Kind{
	Grants:  true,
	Starves: true,
	New: func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return mutex.New(c, name, opts...)
	},
	Key:  func(name string) string { return "relock:mutex:{" + name + "}" },
	Type: "mutex",
	Tokens: func(ctx context.Context, rdb redis.UniversalClient, name string) []string {
		v, err := rdb.Get(ctx, "relock:mutex:{"+name+"}").Result()
		if err != nil {
			return nil
		}
		tok, _, _ := strings.Cut(v, ":")
		return []string{tok}
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

func TestClusterFailover(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterFailover(t, kind)
}

func TestSentinelFailover(t *testing.T) {
	redistest.Parallel(t)
	locktest.SentinelFailover(t, kind)
}

func TestFinalReleaseResentAfterRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.FinalReleaseResentAfterRenewal(t, kind)
}

func TestClusterMoves(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterMoves(t, kind)
}

func TestClusterReshard(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReshard(t, kind)
}

func TestClusterReleaseMidMigration(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReleaseMidMigration(t, kind)
}

// TestGiveUpNamesLock: a Lock whose ctx ends while it waits says which
// lock it gave up on, as every other error of a handle does.
func TestGiveUpNamesLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		holder := mutex.New(c, name)
		require.NoError(t, holder.Lock(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := mutex.New(c, name).Lock(ctx)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, `mutex: lock "`+name+`": relock: lock not obtained: context deadline exceeded`, err.Error())
		require.NoError(t, holder.Unlock(context.Background()))
	})
}

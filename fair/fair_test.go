package fair_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("RELOCK_TEST_WAITER"); spec != "" {
		waitForever(spec) // the child process of TestKilledWaiter
		return
	}
	os.Exit(redistest.MainCluster(m))
}

// lease is the watchdog timeout of the tests' clients: short, so request
// records (kept at most one lease) are gone soon after a test, and long
// enough for renewals on a loaded machine (1 s was lost on miniredis
// beside other test binaries).
const lease = 2 * time.Second

func newClient(t *testing.T, s *redistest.Server) *relock.Client {
	t.Helper()
	c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
	return c
}

func base(name string) string { return "relock:fair:{" + name + "}" }

// assertNothingLeft checks that every key of the lock is gone within one
// lease (request records) or heartbeat (queue), once all are done.
func assertNothingLeft(t *testing.T, s *redistest.Server, name string) {
	t.Helper()
	assertGoneWithin(t, s, name, lease)
}

func assertGoneWithin(t *testing.T, s *redistest.Server, name string, d time.Duration) {
	t.Helper()
	assert.Eventually(t, func() bool {
		// Not s.Keys: this runs in a goroutine that may outlive t.
		keys, err := s.ScanKeys(base(name) + "*")
		return err == nil && len(keys) == 0
	}, d+2*time.Second, 20*time.Millisecond, "keys left: %v", s.Keys(t, base(name)+"*")) // a clean-up lands late on a loaded machine
}

func queue(t *testing.T, s *redistest.Server, name string) []string {
	t.Helper()
	q, err := s.Client(t).ZRange(context.Background(), base(name)+":queue", 0, -1).Result()
	require.NoError(t, err)
	return q
}

// waitQueued waits until the queue holds n waiters.
func waitQueued(t *testing.T, s *redistest.Server, name string, n int) {
	t.Helper()
	rdb := s.Client(t) // one client for every poll
	require.Eventually(t, func() bool {
		return rdb.ZCard(context.Background(), base(name)+":queue").Val() == int64(n)
	}, 5*time.Second, 2*time.Millisecond, "queue never reached %d waiters", n)
}

// runInOrder starts one waiter per handle, each after the previous one has
// joined the queue and gap has passed, releases the holder, and returns the
// order in which the waiters acquired.
func runInOrder(t *testing.T, s *redistest.Server, name string, holder *fair.Lock, handles []*fair.Lock, gap time.Duration) []int {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			if err := h.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, s, name, i+1)
		time.Sleep(gap)
	}
	require.NoError(t, holder.Unlock(ctx))
	wg.Wait()
	return order
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestArrivalOrder(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		c := newClient(t, s)
		name := redistest.Name(t)
		holder := fair.New(c, name)
		require.NoError(t, holder.Lock(context.Background()))
		var handles []*fair.Lock
		for i := 0; i < 8; i++ {
			handles = append(handles, fair.New(c, name))
		}
		assert.Equal(t, seq(8), runInOrder(t, s, name, holder, handles, 100*time.Millisecond))
		assertNothingLeft(t, s, name)
	})
}

func TestArrivalOrderAcrossClients(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		clients := []*relock.Client{newClient(t, s), newClient(t, s), newClient(t, s)}
		holder := fair.New(clients[0], name)
		require.NoError(t, holder.Lock(context.Background()))
		var handles []*fair.Lock
		for i := 0; i < 24; i++ {
			handles = append(handles, fair.New(clients[i%3], name))
		}
		assert.Equal(t, seq(24), runInOrder(t, s, name, holder, handles, 10*time.Millisecond))
		assertNothingLeft(t, s, name)
	})
}

func TestTryLockDoesNotQueue(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c := newClient(t, s)
		name := redistest.Name(t)
		a, b := fair.New(c, name), fair.New(c, name)
		require.NoError(t, a.Lock(ctx))
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Empty(t, queue(t, s, name), "TryLock joined the queue")
		assert.Empty(t, s.Keys(t, base(name)+":timeouts"))

		ok, err = a.TryLock(ctx) // re-entry
		require.NoError(t, err)
		assert.True(t, ok)

		// No barging: right after the release, the queued waiter is owed
		// the lock, and a TryLock from elsewhere must not take it.
		w := fair.New(c, name)
		got := make(chan error, 1)
		go func() { got <- w.Lock(ctx) }()
		waitQueued(t, s, name, 1)
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))
		ok, err = b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "TryLock jumped the queue")
		require.NoError(t, <-got)
		require.NoError(t, w.Unlock(ctx))
		require.NoError(t, a.Lock(ctx))
		require.NoError(t, a.Lock(ctx))
		n, err := a.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		assertNothingLeft(t, s, name)
	})
}

func TestCancelledWaiterLeavesQueue(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c := newClient(t, s)
		name := redistest.Name(t)
		holder := fair.New(c, name)
		require.NoError(t, holder.Lock(ctx))

		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		cctx, cancel := context.WithCancel(ctx)
		for i := 0; i < 5; i++ {
			h := fair.New(c, name)
			wctx := ctx
			if i == 2 {
				wctx = cctx
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := h.Lock(wctx)
				if i == 2 {
					assert.ErrorIs(t, err, relock.ErrNotObtained)
					assert.ErrorIs(t, err, context.Canceled)
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				_ = h.Unlock(ctx)
			}()
			waitQueued(t, s, name, i+1)
		}
		cancel()
		waitQueued(t, s, name, 4) // left at once, not at its deadline
		require.NoError(t, holder.Unlock(ctx))
		wg.Wait()
		assert.Equal(t, []int{0, 1, 3, 4}, order)
		assertNothingLeft(t, s, name)
	})
}

func TestCancelledHeadWakesNext(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// The head gives up just as the lock is free: the next waiter must
		// move up without waiting for a timer.
		ctx := context.Background()
		c := newClient(t, s)
		name := redistest.Name(t)
		hb := relock.WithHeartbeat(20 * time.Second) // timers of 1 s at most
		holder := fair.New(c, name, hb)
		require.NoError(t, holder.Lock(ctx))
		head, next := fair.New(c, name, hb), fair.New(c, name, hb)
		hctx, cancel := context.WithCancel(ctx)
		headDone := make(chan error, 1)
		go func() { headDone <- head.Lock(hctx) }()
		waitQueued(t, s, name, 1)
		got := make(chan time.Time, 1)
		go func() {
			if err := next.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		waitQueued(t, s, name, 2)
		// Release while the head is still queued, then cancel the head. The
		// head may still win the race (its wake-up was already on the way):
		// then the next waiter must get the lock as soon as the head
		// releases it.
		require.NoError(t, holder.Unlock(ctx))
		cancel()
		if err := <-headDone; err == nil {
			require.NoError(t, head.Unlock(ctx))
		} else {
			require.ErrorIs(t, err, relock.ErrNotObtained)
		}
		start := time.Now()
		select {
		case at := <-got:
			assert.Less(t, at.Sub(start), 500*time.Millisecond, "next waiter was not moved up at once")
		case <-time.After(3 * time.Second):
			t.Fatal("next waiter never acquired")
		}
		require.NoError(t, next.Unlock(ctx))
		assertNothingLeft(t, s, name)
	})
}

func TestKilledWaiter(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		s.SingleOnly(t, "the waiter process connects to one address")
		ctx := context.Background()
		const heartbeat = time.Second
		c := newClient(t, s)
		name := redistest.Name(t)
		holder := fair.New(c, name)
		require.NoError(t, holder.Lock(ctx))

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("RELOCK_TEST_WAITER=%s|%s|%s", s.Addr, name, heartbeat))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		// The child exits when its stdin ends: with this process, if it
		// dies before its cleanup could kill the child (a panic did, and
		// the child waited on for good).
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = stdin.Close() })
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "waiting\n", line)
		waitQueued(t, s, name, 1)

		behind := fair.New(c, name, relock.WithHeartbeat(heartbeat))
		// No t in the goroutine: it may outlive the test (its t.Error
		// after a failure panicked the binary).
		type locked struct {
			at  time.Time
			err error
		}
		got := make(chan locked, 1)
		go func() {
			err := behind.Lock(ctx)
			got <- locked{time.Now(), err}
		}()
		waitQueued(t, s, name, 2)
		time.Sleep(2 * heartbeat) // the live child keeps its place meanwhile
		require.Len(t, queue(t, s, name), 2, "a live waiter was dropped")

		require.NoError(t, cmd.Process.Kill()) // SIGKILL: it never leaves
		killed := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		select {
		case r := <-got:
			require.NoError(t, r.err, "the Lock of the waiter behind a dead one")
			delay := r.at.Sub(killed)
			assert.Less(t, delay, heartbeat+heartbeat/2, "a dead waiter delayed the queue by %v", delay)
		case <-time.After(5 * heartbeat):
			t.Fatal("the waiter behind a dead one was never served")
		}
		require.NoError(t, behind.Unlock(ctx))
		assertNothingLeft(t, s, name)
	})
}

// waitForever is the child process of TestKilledWaiter: it queues for a
// held fair lock and waits there until it is killed.
func waitForever(spec string) {
	parts := strings.Split(spec, "|")
	hb, err := time.ParseDuration(parts[2])
	if err != nil {
		panic(err)
	}
	go func() { // see TestKilledWaiter
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	c := relock.New(redis.NewClient(&redis.Options{Addr: parts[0]}))
	fmt.Println("waiting")
	_ = fair.New(c, parts[1], relock.WithHeartbeat(hb)).Lock(context.Background())
	select {}
}

func TestLongWaiterIsServed(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const heartbeat = 300 * time.Millisecond
		c := newClient(t, s)
		name := redistest.Name(t)
		holder := fair.New(c, name)
		require.NoError(t, holder.Lock(ctx))
		w := fair.New(c, name, relock.WithHeartbeat(heartbeat))
		got := make(chan error, 1)
		go func() { got <- w.Lock(ctx) }()
		waitQueued(t, s, name, 1)
		time.Sleep(3*heartbeat + 100*time.Millisecond)
		assert.Len(t, queue(t, s, name), 1, "a live waiter was dropped after 3 heartbeat timeouts")
		require.NoError(t, holder.Unlock(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(3 * time.Second):
			t.Fatal("long waiter not served")
		}
		require.NoError(t, w.Unlock(ctx))
		assertNothingLeft(t, s, name)
	})
}

func TestManyWaiters(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		n := 500
		if !s.Real() {
			// miniredis runs each queue script about 7 times slower, and
			// this test was the slowest of the package there: the scripts'
			// logic is the same for 100.
			n = 100
		}
		name := redistest.Name(t)
		// A longer lease than the other tests': with hundreds of waiters on
		// a loaded 2-core machine, a 1 s lease can lapse before a holder's
		// unlock gets a connection from the pool.
		const longLease = 5 * time.Second
		var clients []*relock.Client
		for i := 0; i < 2; i++ {
			c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(longLease))
			clients = append(clients, c)
		}
		counter := 0 // guarded by the lock only
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			l := fair.New(clients[i%2], name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				if err := l.Lock(wctx); err != nil {
					t.Error(err)
					return
				}
				counter++
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, n, counter)
		assertGoneWithin(t, s, name, longLease)
	})
}

func TestReplayedScriptsCountOnce(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		replay := &redistest.Replay{}
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		redistest.AddHook(rdb, replay)
		name := redistest.Name(t)
		l := fair.New(c, name)
		replay.Enable(true)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(ctx))
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		replay.Enable(false)
		assert.Positive(t, replay.Replays.Load())
		assertNothingLeft(t, s, name)
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	c := relock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	defer c.Close()
	assert.ErrorIs(t, fair.New(c, "x", relock.WithHeartbeat(-time.Second)).Lock(ctx), relock.ErrInvalidOption)
	assert.ErrorIs(t, fair.New(c, "}").Lock(ctx), relock.ErrInvalidName)
	_, err := fair.New(nil, "x").TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNilClient)
}

// kind describes the fair lock to the tests every lock type shares.
var kind = locktest.Kind{
	Grants: true,
	New: func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return fair.New(c, name, opts...)
	},
	Key:       base,
	Reentrant: true,
	Type:      "fair",
	Tokens: func(ctx context.Context, rdb redis.UniversalClient, name string) []string {
		return rdb.HKeys(ctx, base(name)).Val()
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

// TestMixedHeartbeats: a waiter with a short heartbeat leaves; the queue
// must still live as long as the longest heartbeat of the waiters in it,
// so an earlier waiter with a long heartbeat keeps its place.
func TestMixedHeartbeats(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c := newClient(t, s)
		name := redistest.Name(t)
		holder := fair.New(c, name)
		require.NoError(t, holder.Lock(ctx))

		first := fair.New(c, name, relock.WithHeartbeat(5*time.Second)) // refreshes every second
		firstDone := make(chan struct{})
		go func() {
			if err := first.Lock(ctx); err != nil {
				t.Error(err)
			}
			close(firstDone)
		}()
		waitQueued(t, s, name, 1)

		short := fair.New(c, name, relock.WithHeartbeat(100*time.Millisecond))
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, short.Lock(sctx), relock.ErrNotObtained)
		time.Sleep(300 * time.Millisecond) // > the short heartbeat, < first's refresh
		assert.Len(t, queue(t, s, name), 1, "the first waiter lost its place")

		late := fair.New(c, name)
		lateDone := make(chan struct{})
		go func() {
			if err := late.Lock(ctx); err != nil {
				t.Error(err)
			}
			close(lateDone)
		}()
		waitQueued(t, s, name, 2)
		require.NoError(t, holder.Unlock(ctx))
		select {
		case <-firstDone:
			require.NoError(t, first.Unlock(ctx))
			<-lateDone
			require.NoError(t, late.Unlock(ctx))
		case <-lateDone:
			t.Error("a later arrival was served before an earlier waiter")
			require.NoError(t, late.Unlock(ctx))
			<-firstDone
			require.NoError(t, first.Unlock(ctx))
		case <-time.After(5 * time.Second):
			t.Fatal("nobody was served after the release")
		}
		assertNothingLeft(t, s, name)
	})
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

func TestSentinelFailover(t *testing.T) {
	redistest.Parallel(t)
	locktest.SentinelFailover(t, kind)
}

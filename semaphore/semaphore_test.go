package semaphore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/semaphore"
)

// The calls of these tests run in goroutines (see redistest.Async).
type result = redistest.Result

var (
	async   = redistest.Async
	await   = redistest.Await
	pending = redistest.Pending
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("RELOCK_TEST_SEM_HOLDER"); spec != "" {
		holdForever(spec) // the child process of TestKilledHolder
		return
	}
	os.Exit(redistest.MainCluster(m))
}

var newClient = redistest.NewClient

func key(name string) string { return "relock:semaphore:{" + name + "}" }

// semKeys returns the keys of the semaphore called name other than
// request records (which live up to a lease by design, see
// core.RecordTTL; a force-release's, force.MaxRecordTTL).
func semKeys(t *testing.T, s *redistest.Server, name string) []string {
	t.Helper()
	return withoutRecords(s.Keys(t, key(name)+"*"), name)
}

// withoutRecords returns keys, of the semaphore called name, but its
// request records.
func withoutRecords(keys []string, name string) []string {
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, key(name)+":r:") && !strings.HasPrefix(k, key(name)+":f:") {
			out = append(out, k)
		}
	}
	return out
}

// testCtx is a test's context: a stall fails the test after 30 s instead
// of hanging the package until its timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func available(t *testing.T, s *semaphore.Semaphore) int {
	t.Helper()
	n, err := s.Available(context.Background())
	require.NoError(t, err)
	return n
}

func try(t *testing.T, s *semaphore.Semaphore, n int) bool {
	t.Helper()
	ok, err := s.TryAcquire(context.Background(), n)
	require.NoError(t, err)
	return ok
}

func TestAcquireRelease(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		a, b := semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		assert.Equal(t, 3, available(t, a), "a new semaphore")

		require.NoError(t, a.Acquire(ctx, 2))
		assert.Equal(t, 2, a.Held())
		assert.Equal(t, 1, available(t, b))
		assert.False(t, try(t, b, 2), "2 permits taken while 1 is free")
		assert.True(t, try(t, b, 1))
		assert.Equal(t, 0, available(t, a))
		require.NoError(t, a.Release(ctx, 1))
		assert.Equal(t, 1, a.Held())
		assert.Equal(t, 1, available(t, a))

		// Releasing more than held changes nothing.
		assert.ErrorIs(t, a.Release(ctx, 2), relock.ErrNotHeld)
		assert.Equal(t, 1, a.Held())
		assert.Equal(t, 1, available(t, a), "a refused release gave permits back")
		assert.ErrorIs(t, semaphore.New(c, name, 3).Release(ctx, 1), relock.ErrNotHeld, "release by a handle that holds none")
		assert.Equal(t, 1, available(t, a))

		require.NoError(t, a.Acquire(ctx, 1), "a handle that holds permits takes more")
		assert.Equal(t, 2, a.Held())
		require.NoError(t, b.Release(ctx, 1))
		require.NoError(t, a.Release(ctx, 2))
		assert.Zero(t, a.Held())
		assert.Equal(t, 3, available(t, a))
		assert.Empty(t, semKeys(t, s, name), "keys left after the last release")
	})
}

func TestInvalidCounts(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A request that can never be granted is refused at once, never
		// waited for (the ctx has no deadline).
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		sem := semaphore.New(c, name, 3)
		for _, n := range []int{0, -1, 4} {
			assert.ErrorIs(t, sem.Acquire(ctx, n), relock.ErrInvalidOption, "Acquire(%d)", n)
			_, err := sem.TryAcquire(ctx, n)
			assert.ErrorIs(t, err, relock.ErrInvalidOption, "TryAcquire(%d)", n)
		}
		assert.ErrorIs(t, sem.Release(ctx, 0), relock.ErrInvalidOption)
		assert.ErrorIs(t, sem.Release(ctx, 4), relock.ErrNotHeld, "release of more than the capacity")
		assert.Equal(t, 3, available(t, sem))
		assert.Empty(t, s.Keys(t, key(name)+"*"))
	})
}

func TestCapacityMismatch(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		three, five := semaphore.New(c, name, 3), semaphore.New(c, name, 5)
		require.NoError(t, three.Acquire(ctx, 1))

		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		err := five.Acquire(wctx, 1)
		assert.ErrorIs(t, err, relock.ErrCapacityMismatch)
		assert.NotErrorIs(t, err, relock.ErrNotObtained, "a mismatch is refused, not waited for")
		assert.Less(t, time.Since(start), time.Second)
		assert.Contains(t, err.Error(), "5 permits")
		_, err = five.TryAcquire(ctx, 1)
		assert.ErrorIs(t, err, relock.ErrCapacityMismatch)
		_, err = five.Available(ctx)
		assert.ErrorIs(t, err, relock.ErrCapacityMismatch)
		forced, err := five.ForceRelease(ctx)
		assert.ErrorIs(t, err, relock.ErrCapacityMismatch, "a force-release with another capacity")
		assert.False(t, forced)
		assert.Zero(t, five.Held())
		assert.Equal(t, 2, available(t, three), "a refused handle changed the semaphore")

		// Once idle, nothing is stored: the name may be used with another
		// capacity.
		require.NoError(t, three.Release(ctx, 1))
		require.NoError(t, five.Acquire(ctx, 5))
		_, err = three.TryAcquire(ctx, 1)
		assert.ErrorIs(t, err, relock.ErrCapacityMismatch)
		require.NoError(t, five.Release(ctx, 5))
		assert.Empty(t, semKeys(t, s, name))
	})
}

// TestCapacityNeverExceeded hammers one semaphore from many handles on
// several Clients, each taking 1 to 3 permits, and checks with a local
// tally that the permits held at once never exceed the capacity.
func TestCapacityNeverExceeded(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a stall fails, not hangs
		defer cancel()
		name := redistest.Name(t)
		const permits, clients, handles, cycles = 4, 3, 4, 8
		var mu sync.Mutex
		inUse, most, violations := 0, 0, 0
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			c, _ := newClient(t, s)
			for j := 0; j < handles; j++ {
				sem := semaphore.New(c, name, permits)
				n := 1 + (i+j)%3
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < cycles; k++ {
						if err := sem.Acquire(ctx, n); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						inUse += n
						most = max(most, inUse)
						if inUse > permits {
							violations++
						}
						mu.Unlock()
						time.Sleep(time.Millisecond)
						mu.Lock()
						inUse -= n
						mu.Unlock()
						if err := sem.Release(ctx, n); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		assert.Zero(t, violations, "more permits held than the capacity")
		assert.Greater(t, most, 1, "permits were never held by several handles at once")
		t.Logf("at most %d of %d permits held at once", most, permits)
		assert.Empty(t, semKeys(t, s, name), "keys left after all released")
	})
}

func TestFIFOOrder(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A waiter for 2 is ahead of a waiter for 1: a permit coming back
		// is not enough for the head, and the waiter behind does not
		// overtake it even though 1 permit would fit; neither does a
		// TryAcquire.
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		holder, big, small, other := semaphore.New(c, name, 2), semaphore.New(c, name, 2),
			semaphore.New(c, name, 2), semaphore.New(c, name, 2)
		require.NoError(t, holder.Acquire(ctx, 2))
		bigGot := async(func() error { return big.Acquire(ctx, 2) })
		time.Sleep(100 * time.Millisecond)
		smallGot := async(func() error { return small.Acquire(ctx, 1) })
		time.Sleep(100 * time.Millisecond)

		require.NoError(t, holder.Release(ctx, 1))
		time.Sleep(300 * time.Millisecond) // past a timed retry of each
		pending(t, bigGot, "Acquire(2) with 1 permit free")
		pending(t, smallGot, "Acquire(1) behind a waiting Acquire(2)")
		assert.False(t, try(t, other, 1), "TryAcquire overtook a waiter")
		assert.Equal(t, 1, available(t, other))

		released := time.Now()
		require.NoError(t, holder.Release(ctx, 1))
		r := await(t, bigGot, 3*time.Second, "Acquire(2) once both permits came back")
		require.NoError(t, r.Err)
		// A timed retry comes about a second apart: a grant is pushed.
		assert.Less(t, r.At.Sub(released), 300*time.Millisecond, "the release did not hand the permits over")
		pending(t, smallGot, "Acquire(1) while the head holds everything")

		released = time.Now()
		require.NoError(t, big.Release(ctx, 2))
		r = await(t, smallGot, 3*time.Second, "Acquire(1) after the head released")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(released), 300*time.Millisecond)
		assert.Equal(t, 1, available(t, other))
		require.NoError(t, small.Release(ctx, 1))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestReleaseGrantsSeveralWaiters(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		const permits = 4
		holder := semaphore.New(c, name, permits)
		require.NoError(t, holder.Acquire(ctx, permits))
		var waiters []*semaphore.Semaphore
		var got []<-chan result
		for i := 0; i < 3; i++ {
			wc, _ := newClient(t, s)
			w := semaphore.New(wc, name, permits)
			waiters = append(waiters, w)
			n := 1 + i%2 // 1, 2, 1: all fit in 4
			got = append(got, async(func() error { return w.Acquire(ctx, n) }))
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		released := time.Now()
		require.NoError(t, holder.Release(ctx, permits))
		for i, ch := range got {
			r := await(t, ch, 3*time.Second, fmt.Sprintf("waiter %d", i))
			require.NoError(t, r.Err)
			assert.Less(t, r.At.Sub(released), 300*time.Millisecond, "waiter %d was not granted by the release", i)
		}
		assert.Equal(t, 0, available(t, holder))
		for i, w := range waiters {
			require.NoError(t, w.Release(ctx, w.Held()), "waiter %d", i)
		}
		assert.Empty(t, semKeys(t, s, name))
	})
}

// TestLargeRequestNotStarved: workers cycle through 1 permit each, so
// with x/sync's rule broken (later small requests overtaking a waiting
// large one) the permits are never all free at once and a request for
// all of them waits forever.
func TestLargeRequestNotStarved(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx, stop := context.WithCancel(context.Background())
		name := redistest.Name(t)
		const permits, workers = 4, 6
		var inside, cycles atomic.Int64
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		for i := 0; i < workers; i++ {
			c, _ := newClient(t, s)
			w := semaphore.New(c, name, permits)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if err := w.Acquire(ctx, 1); err != nil {
						if ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					inside.Add(1)
					cycles.Add(1)
					time.Sleep(10 * time.Millisecond)
					inside.Add(-1)
					if err := w.Release(context.Background(), 1); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		require.Eventually(t, func() bool { return cycles.Load() > 3*workers }, 5*time.Second, time.Millisecond,
			"workers did not get going")

		c, _ := newClient(t, s)
		big := semaphore.New(c, name, permits)
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, big.Acquire(bctx, permits), "the large request was starved")
		assert.Less(t, time.Since(start), 2*time.Second, "the large request waited too long")
		assert.Zero(t, inside.Load(), "a worker holds a permit while the large request holds them all")
		before := cycles.Load()
		time.Sleep(30 * time.Millisecond)
		assert.Equal(t, before, cycles.Load(), "a worker got a permit while the large request holds them all")
		require.NoError(t, big.Release(context.Background(), permits))
		assert.Eventually(t, func() bool { return cycles.Load() > before+workers }, 3*time.Second, time.Millisecond,
			"workers did not resume")
	})
}

func TestCrashedHolderClientClosed(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const lease = 600 * time.Millisecond // 200 ms lapsed on a loaded machine
		crashing := relock.New(s.Client(t), relock.WithWatchdogTimeout(lease))
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		dead := semaphore.New(crashing, name, 3)
		require.NoError(t, dead.Acquire(ctx, 2))
		time.Sleep(2 * lease)
		w := semaphore.New(c, name, 3)
		assert.Equal(t, 1, available(t, w), "the watchdog did not keep the permits")

		got := async(func() error { return w.Acquire(ctx, 3) })
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, crashing.Close()) // the holder "crashes": no release, no more renewals
		crashed := time.Now()
		r := await(t, got, 3*time.Second, "Acquire of a crashed holder's permits")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(crashed), lease+500*time.Millisecond, "permits came back later than one lease")
		assert.ErrorIs(t, dead.Release(ctx, 2), relock.ErrNotHeld)
		require.NoError(t, w.Release(ctx, 3))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestKilledHolder(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		s.SingleOnly(t, "the holder process connects to one address")
		const lease, permits = 300 * time.Millisecond, 2
		name := redistest.Name(t)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("RELOCK_TEST_SEM_HOLDER=%s|%s|%s|%d", s.Addr, name, lease, permits))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "acquired\n", line)

		c, _ := newClient(t, s)
		sem := semaphore.New(c, name, permits)
		time.Sleep(2 * lease) // the child's watchdog keeps its permits
		assert.False(t, try(t, sem, 1), "the live child's permits were not kept alive")

		require.NoError(t, cmd.Process.Kill()) // SIGKILL: no release, no Close
		start := time.Now()
		require.NoError(t, sem.Acquire(ctx, permits))
		assert.Less(t, time.Since(start), lease+300*time.Millisecond, "permits came back later than one lease after the kill")
		require.NoError(t, sem.Release(ctx, permits))
		assert.Empty(t, semKeys(t, s, name))
	})
}

// holdForever is the child process of TestKilledHolder: it takes permits
// with a short watchdog lease, says so, and waits to be killed.
func holdForever(spec string) {
	parts := strings.Split(spec, "|")
	lease, err := time.ParseDuration(parts[2])
	if err != nil {
		panic(err)
	}
	n, _ := strconv.Atoi(parts[3])
	c := relock.New(redis.NewClient(&redis.Options{Addr: parts[0]}), relock.WithWatchdogTimeout(lease))
	if err := semaphore.New(c, parts[1], n).Acquire(context.Background(), n); err != nil {
		panic(err)
	}
	fmt.Println("acquired")
	select {}
}

func TestFixedLeaseLapses(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		name := redistest.Name(t)
		held := semaphore.New(c, name, 3, relock.WithLease(200*time.Millisecond))
		require.NoError(t, held.Acquire(ctx, 2))
		select {
		case <-held.Lost():
		case <-time.After(time.Second):
			t.Fatal("Lost did not fire when the fixed lease ran out")
		}
		assert.ErrorIs(t, held.LostErr(), relock.ErrLeaseExpired)
		assert.Zero(t, held.Held())
		// The local deadline comes a drift margin before the expiry at Redis.
		assert.Eventually(t, func() bool { // no t here: it may outlive t
			n, err := semaphore.New(c, name, 3).Available(ctx)
			return err == nil && n == 3
		},
			500*time.Millisecond, 5*time.Millisecond, "a lapsed holder's permits did not come back")
		assert.ErrorIs(t, held.Acquire(ctx, 1), relock.ErrNotHeld, "acquire with lost permits owed")
		assert.ErrorIs(t, held.Release(ctx, 2), relock.ErrNotHeld)
		require.NoError(t, held.Acquire(ctx, 1), "acquire once the owed release was made")
		require.NoError(t, held.Release(ctx, 1))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestWatchdogKeepsPermits(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const lease = 600 * time.Millisecond // 400 ms was too short for a loaded machine
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		a, b := semaphore.New(c, name, 2), semaphore.New(c, name, 2)
		require.NoError(t, a.Acquire(ctx, 1))
		require.NoError(t, a.Acquire(ctx, 1))
		time.Sleep(3 * lease)
		assert.False(t, try(t, b, 1), "permits expired under the watchdog")
		require.NoError(t, a.Release(ctx, 1))
		time.Sleep(2 * lease)
		assert.True(t, try(t, b, 1))
		assert.False(t, try(t, b, 1), "the permit kept by a partial release expired under the watchdog")
		select {
		case <-a.Lost():
			t.Fatal("Lost fired while the watchdog renewed the permits")
		default:
		}
		require.NoError(t, a.Release(ctx, 1))
		require.NoError(t, b.Release(ctx, 1))

		// No renewal after the last release: nothing is sent, nothing left.
		// A renewal round that began before the release may still be on
		// its way (it finds the hold gone; on a Cluster its commands go
		// one by one): a period (200 ms) later, nothing.
		time.Sleep(250 * time.Millisecond)
		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		time.Sleep(lease)
		assert.Zero(t, counter.Commands(), "commands sent after the last release: %v", counter.Names())
		assert.Empty(t, semKeys(t, s, name), "keys left after the last release")
	})
}

func TestCancelledWaitLeavesNothing(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A waiter for 2 at the head gives up: the waiter for 1 behind it,
		// which fits, is granted at once, and nothing of the first is left.
		ctx := testCtx(t)
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		holder, big, small := semaphore.New(c, name, 2), semaphore.New(c, name, 2), semaphore.New(c, name, 2)
		require.NoError(t, holder.Acquire(ctx, 1))
		// A wait opens the Client's subscription connection, which stays.
		redistest.Subscribed(t, func(ctx context.Context) error { return big.Acquire(ctx, 2) })
		redistest.CheckGoroutines(t)

		bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		gaveUp := async(func() error { return big.Acquire(bctx, 2) })
		// Each seen in the queue, not after fixed 100 ms sleeps (on a
		// loaded machine the Acquire(1) could come first, and get in).
		queued := func(n int64, what string) {
			t.Helper()
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, key(name)+":queue").Val() == n },
				5*time.Second, 2*time.Millisecond, "%s never queued", what)
		}
		queued(1, "the Acquire(2)")
		smallGot := async(func() error { return small.Acquire(ctx, 1) })
		queued(2, "the Acquire(1) behind it")
		pending(t, smallGot, "Acquire(1) behind a waiting Acquire(2)")

		g := await(t, gaveUp, 3*time.Second, "Acquire(2) with a 300 ms ctx")
		assert.ErrorIs(t, g.Err, relock.ErrNotObtained)
		assert.ErrorIs(t, g.Err, context.DeadlineExceeded)
		assert.Zero(t, big.Held())
		r := await(t, smallGot, 3*time.Second, "Acquire(1) after the head gave up")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(g.At), 300*time.Millisecond, "the waiter behind was not granted when the head left")
		assert.Zero(t, rdb.Exists(ctx, key(name)+":queue").Val(), "queue entry left behind")

		require.NoError(t, holder.Release(ctx, 1))
		require.NoError(t, small.Release(ctx, 1))
		assert.Empty(t, semKeys(t, s, name), "keys left behind")
		if s.Real() {
			assert.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, key(name)).Result()
				return err == nil && n[key(name)] == 0
			}, 2*time.Second, 10*time.Millisecond, "subscription left behind")
		}
	})
}

func TestGrantThenGiveUpKeepsEarlierPermits(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A handle holding 1 permit waits for 2 more; the release grants
		// them, but the push is lost and the waiter's ctx ends before it
		// finds the grant. It keeps its 1 permit; the 2 go to the next
		// waiter at once.
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		s.SingleOnly(t, "a proxy in front of one address")
		proxy := redistest.NewProxy(t, s.Addr)
		wrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr})
		t.Cleanup(func() { _ = wrdb.Close() })
		wc := relock.New(wrdb)
		t.Cleanup(func() { _ = wc.Close() })
		name := redistest.Name(t)
		holder, w, next := semaphore.New(c, name, 3), semaphore.New(wc, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, holder.Acquire(ctx, 2))
		require.NoError(t, w.Acquire(ctx, 1))
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wGot := async(func() error { return w.Acquire(wctx, 2) })
		time.Sleep(150 * time.Millisecond)
		nextGot := async(func() error { return next.Acquire(ctx, 2) })
		time.Sleep(150 * time.Millisecond)
		proxy.Drop([]byte("g|")) // w will not hear of its grant
		require.NoError(t, holder.Release(ctx, 2))
		time.Sleep(20 * time.Millisecond)
		gaveUp := time.Now()
		cancel()
		r := await(t, wGot, 3*time.Second, "the Acquire that gave up")
		if r.Err == nil {
			t.Skip("the waiter's timed attempt found its grant before it gave up")
		}
		assert.ErrorIs(t, r.Err, relock.ErrNotObtained)
		assert.ErrorIs(t, r.Err, context.Canceled)
		r = await(t, nextGot, 3*time.Second, "the next waiter's Acquire")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(gaveUp), 500*time.Millisecond, "the grant was not passed on when its waiter gave up")
		assert.Equal(t, 1, w.Held(), "the waiter that gave up lost the permit it held before")
		assert.Equal(t, 0, available(t, next))
		proxy.Drop(nil)
		require.NoError(t, w.Release(ctx, 1))
		require.NoError(t, next.Release(ctx, 2))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestDeadWaiterLeavesNothing(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A waiter at the head dies (its network cut: its Leave never
		// arrives). The waiter behind it moves up within the dead one's
		// heartbeat, and once everyone is gone no key is left.
		ctx := testCtx(t)
		const hb = 400 * time.Millisecond
		c, _ := newClient(t, s)
		s.SingleOnly(t, "a proxy in front of one address")
		proxy := redistest.NewProxy(t, s.Addr)
		drdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = drdb.Close() })
		dc := relock.New(drdb)
		t.Cleanup(func() { _ = dc.Close() })
		name := redistest.Name(t)
		holder, next := semaphore.New(c, name, 2), semaphore.New(c, name, 2)
		dead := semaphore.New(dc, name, 2, relock.WithHeartbeat(hb))
		require.NoError(t, holder.Acquire(ctx, 1))
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Each waiter seen in the queue before the next step (fixed
		// 100 ms sleeps were too short on a loaded machine: the dead
		// waiter was not queued yet, and next took the free permit).
		admin := s.Admin(t)
		queued := func(n int64, what string) {
			t.Helper()
			require.Eventually(t, func() bool { return admin.ZCard(ctx, key(name)+":queue").Val() == n },
				5*time.Second, 2*time.Millisecond, "%s never queued", what)
		}
		deadGot := async(func() error { return dead.Acquire(dctx, 2) })
		queued(1, "the Acquire(2)")
		nextGot := async(func() error { return next.Acquire(ctx, 1) })
		queued(2, "the Acquire(1) behind it")
		pending(t, nextGot, "Acquire(1) behind a waiting Acquire(2)")
		proxy.Blackhole(true)
		died := time.Now()
		cancel()
		r := await(t, nextGot, 3*time.Second, "Acquire behind a dead waiter")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(died), hb+1200*time.Millisecond, "a dead waiter held the queue up for longer than its heartbeat")
		assert.Error(t, await(t, deadGot, 3*time.Second, "the dead waiter's Acquire").Err)
		require.NoError(t, holder.Release(ctx, 1))
		require.NoError(t, next.Release(ctx, 1))
		assert.Eventually(t, func() bool {
			// Not semKeys: this runs in a goroutine that may outlive t.
			keys, err := s.ScanKeys(key(name) + "*")
			return err == nil && len(withoutRecords(keys, name)) == 0
		}, 2*hb, 20*time.Millisecond,
			"keys left after the holders left and the dead waiter's entry lapsed: %v", semKeys(t, s, name))
	})
}

func TestCancelDuringAcquireReleasesIt(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		// CLIENT PAUSE (not in miniredis) holds the acquire until after
		// ctx ended; the permits it took must be given back.
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		admin := s.Client(t)
		name := redistest.Name(t)
		sem := semaphore.New(c, name, 3)
		require.NoError(t, sem.Acquire(ctx, 1))
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err())
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := sem.Acquire(wctx, 2)
		cancel()
		require.ErrorIs(t, err, relock.ErrNotObtained)
		time.Sleep(400 * time.Millisecond)
		assert.Equal(t, 1, sem.Held(), "the cancelled acquire changed the handle's count")
		assert.Equal(t, 2, available(t, sem), "an acquire that landed after ctx ended kept its permits")
		require.NoError(t, sem.Release(ctx, 1))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestRetriedScriptsAreIdempotent(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		replay := &redistest.Replay{}
		c, rdb := redistest.NewClient(t, s)
		redistest.AddHook(rdb, replay)
		name := redistest.Name(t)
		sem, other := semaphore.New(c, name, 5), semaphore.New(c, name, 5)

		replay.Enable(true)
		require.NoError(t, sem.Acquire(ctx, 2), "a replayed acquire must still succeed")
		ok, err := sem.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok, "a replayed TryAcquire must still succeed")
		replay.Enable(false)
		assert.Equal(t, 2, available(t, other), "a replayed acquire took permits twice")
		replay.Enable(true)
		require.NoError(t, sem.Release(ctx, 2), "a replayed release must not report not-held")
		replay.Enable(false)
		assert.Equal(t, 4, available(t, other), "a replayed release gave permits back twice")
		replay.Enable(true)
		require.NoError(t, sem.Release(ctx, 1))
		replay.Enable(false)
		assert.Positive(t, replay.Replays.Load())
		assert.Equal(t, 5, available(t, other))
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestLostReleaseReplyThenAcquire(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A Release is applied but its reply is lost; the handle then
		// acquires before releasing again. The pending Release must be
		// settled once, not lost and not applied twice.
		ctx := testCtx(t)
		faults := &redistest.Faults{}
		c, rdb := redistest.NewClient(t, s)
		redistest.AddHook(rdb, faults)
		name := redistest.Name(t)
		sem, other := semaphore.New(c, name, 4), semaphore.New(c, name, 4)
		require.NoError(t, sem.Acquire(ctx, 3))
		faults.LoseReplies(true)
		require.ErrorIs(t, sem.Release(ctx, 2), redistest.ErrInjected)
		faults.LoseReplies(false)
		assert.Equal(t, 3, sem.Held(), "a release of unknown outcome counted as done")
		require.NoError(t, sem.Acquire(ctx, 1))
		assert.Equal(t, 2, sem.Held(), "3 acquired, 2 released, 1 acquired")
		assert.Equal(t, 2, available(t, other))
		require.NoError(t, sem.Release(ctx, 2))
		assert.ErrorIs(t, sem.Release(ctx, 1), relock.ErrNotHeld)
		assert.Equal(t, 4, available(t, other))
	})
}

func TestStalledServerRetries(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		// DEBUG SLEEP (not in miniredis) stalls the server past the
		// client's read timeout: go-redis resends the script, and both
		// copies run when the server wakes up.
		ctx := testCtx(t)
		rdb := redistest.StallClient(t, s)
		admin := s.Client(t)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		sem := semaphore.New(c, name, 4)
		other := semaphore.New(c, name, 4)

		require.NoError(t, rdb.Ping(ctx).Err()) // a stall during a dial is not retried
		calls := redistest.ScriptCalls(t, admin)
		for _, step := range []struct {
			what string
			f    func(context.Context) error
			free int
		}{
			{"acquire 2", func(ctx context.Context) error { return sem.Acquire(ctx, 2) }, 2},
			{"acquire 1 more", func(ctx context.Context) error { return sem.Acquire(ctx, 1) }, 1},
			{"release 1", func(ctx context.Context) error { return sem.Release(ctx, 1) }, 2},
			{"release 2", func(ctx context.Context) error { return sem.Release(ctx, 2) }, 4},
		} {
			require.NoError(t, rdb.Ping(ctx).Err())
			redistest.Stall(t, admin, 200*time.Millisecond)
			require.NoError(t, step.f(ctx), "%s across a stall", step.what)
			assert.Equal(t, step.free, available(t, other), "free permits after %s", step.what)
		}
		assert.GreaterOrEqual(t, redistest.ScriptCalls(t, admin)-calls, int64(8),
			"the stalls did not make the scripts run more than once")
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestTwoCommandsPerCycle(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// One script call per acquire and per release, however many
		// handles hold permits.
		ctx := testCtx(t)
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		holders := 200
		if !s.Real() {
			holders = 40 // miniredis's Lua is far slower
		}
		for i := 0; i < holders; i++ {
			require.NoError(t, semaphore.New(c, name, holders+1).Acquire(ctx, 1))
		}
		sem := semaphore.New(c, name, holders+1)
		require.NoError(t, sem.Acquire(ctx, 1)) // loads the scripts
		require.NoError(t, sem.Release(ctx, 1))

		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		const cycles = 25
		for i := 0; i < cycles; i++ {
			require.NoError(t, sem.Acquire(ctx, 1))
			require.NoError(t, sem.Release(ctx, 1))
		}
		assert.Equal(t, int64(2*cycles), counter.Commands(), "commands for %d uncontended cycles", cycles)
	})
}

func TestForceRelease(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := newClient(t, s, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := redistest.Name(t)
		a, b, w := semaphore.New(c, name, 3), semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, a.Acquire(ctx, 2))
		require.NoError(t, b.Acquire(ctx, 1))
		got := async(func() error { return w.Acquire(ctx, 3) })
		time.Sleep(100 * time.Millisecond)
		forced := time.Now()
		ok, err := w.ForceRelease(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		r := await(t, got, 3*time.Second, "Acquire after ForceRelease")
		require.NoError(t, r.Err)
		assert.Less(t, r.At.Sub(forced), 300*time.Millisecond, "the waiter was not granted by the force-release")
		for _, h := range []*semaphore.Semaphore{a, b} {
			select {
			case <-h.Lost():
			case <-time.After(2 * time.Second):
				t.Fatal("a former holder's Lost did not fire")
			}
			assert.ErrorIs(t, h.LostErr(), relock.ErrLockGone)
			assert.ErrorIs(t, h.Release(ctx, h.Held()+1), relock.ErrNotHeld)
		}
		assert.Equal(t, 0, available(t, w), "the former holders' releases touched the new holder's permits")
		require.NoError(t, w.Release(ctx, 3))
		ok, err = w.ForceRelease(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "ForceRelease of a free semaphore")
		assert.Empty(t, semKeys(t, s, name))
	})
}

func TestCloseLeaksNoGoroutine(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rdb := s.Client(t)
		redistest.CheckGoroutines(t)
		c := relock.New(rdb)
		name := redistest.Name(t)
		h, w := semaphore.New(c, name, 2), semaphore.New(c, name, 2)
		require.NoError(t, h.Acquire(ctx, 2))
		got := async(func() error { return w.Acquire(ctx, 1) })
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, c.Close())
		r := await(t, got, 3*time.Second, "Acquire across Close")
		assert.ErrorIs(t, r.Err, relock.ErrNotObtained)
		assert.ErrorIs(t, r.Err, relock.ErrClosed)
		select {
		case <-h.Lost():
		default:
			t.Error("Close did not fire Lost of held permits")
		}
		assert.ErrorIs(t, h.Release(ctx, 2), relock.ErrNotHeld)
		assert.ErrorIs(t, h.Acquire(ctx, 1), relock.ErrClosed)
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
		s    *semaphore.Semaphore
		want error
	}{
		{"empty name", semaphore.New(c, "", 1), relock.ErrInvalidName},
		{"brace first", semaphore.New(c, "}x", 1), relock.ErrInvalidName},
		{"oversized name", semaphore.New(c, strings.Repeat("n", 1025), 1), relock.ErrInvalidName},
		{"zero permits", semaphore.New(c, "x", 0), relock.ErrInvalidOption},
		{"negative permits", semaphore.New(c, "x", -3), relock.ErrInvalidOption},
		{"absurd permits", semaphore.New(c, "x", semaphore.MaxPermits+1), relock.ErrInvalidOption},
		{"zero lease", semaphore.New(c, "x", 1, relock.WithLease(0)), relock.ErrInvalidOption},
		{"nil client", semaphore.New(nil, "x", 1), relock.ErrNilClient},
		{"nil redis", semaphore.New(relock.New(nil), "x", 1), relock.ErrNilClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.s.Acquire(ctx, 1), tc.want)
			_, err := tc.s.TryAcquire(ctx, 1)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, tc.s.Release(ctx, 1), tc.want)
			_, err = tc.s.Available(ctx)
			assert.ErrorIs(t, err, tc.want)
			_, err = tc.s.ForceRelease(ctx)
			assert.ErrorIs(t, err, tc.want)
			assert.Zero(t, tc.s.Held())
			assert.Nil(t, tc.s.Lost())
		})
	}
	assert.False(t, errors.Is(semaphore.New(c, "a}b{c", 1).Release(ctx, 1), relock.ErrInvalidName))
}

// sem1 describes a semaphore of one permit, taken and released one at a
// time, to the tests every lock type shares: it behaves as a fair lock
// whose waiters are granted the permit by the release.
var sem1 = locktest.Kind{
	New:    newSem1,
	Key:    key,
	Type:   "semaphore",
	Grants: true,
	Tokens: func(ctx context.Context, rdb redis.UniversalClient, name string) []string {
		if toks := rdb.ZRange(ctx, key(name)+":owners", 0, -1).Val(); len(toks) > 0 {
			return toks
		}
		// A solo semaphore (one holder, no owners' set): its holder.
		var toks []string
		for _, f := range rdb.HKeys(ctx, key(name)).Val() {
			if f != "permits" && f != "used" && !strings.Contains(f, "|") {
				toks = append(toks, f)
			}
		}
		return toks
	},
}

func newSem1(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
	return newSem(c, name, 1, opts...)
}

// sem2 is sem1 with two permits: a handle that holds one may acquire
// another (for ReentryLateReply).
var sem2 = func() locktest.Kind {
	k := sem1
	k.New = func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return newSem(c, name, 2, opts...)
	}
	return k
}()

// newSem is a handle on a semaphore of the given permits whose Lock and
// Unlock acquire and release one.
func newSem(c *relock.Client, name string, permits int, opts ...relock.LockOption) locktest.Side {
	s := semaphore.New(c, name, permits, opts...)
	return locktest.Side{
		Queries:     queries{s: s, c: c},
		LockFunc:    func(ctx context.Context) error { return s.Acquire(ctx, 1) },
		TryLockFunc: func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, 1) },
		UnlockFunc:  func(ctx context.Context) error { return s.Release(ctx, 1) },
		LostFunc:    s.Lost,
		HeldFunc:    func() bool { return s.Held() > 0 },
		LostErrFunc: s.LostErr,
		LockForFunc: func(ctx context.Context, lease time.Duration) error { return s.AcquireFor(ctx, 1, lease) },
		Holds:       s,
		Locker:      s.Locker(1),
	}
}

// queries are the operator's calls of the shared tests, in a semaphore's
// terms: "locked" is "a permit is held", the remaining lease that of the
// longest hold.
type queries struct {
	s *semaphore.Semaphore
	c *relock.Client
}

func (q queries) IsLocked(ctx context.Context) (bool, error) {
	n, err := q.s.Available(ctx)
	return n < q.s.Permits(), err
}

func (q queries) RemainingLease(ctx context.Context) (time.Duration, error) {
	d, err := core.Of(q.c).RDB.PTTL(ctx, key(q.s.Name())).Result()
	return max(d, 0), err
}

func (q queries) ForceUnlock(ctx context.Context) (bool, error) { return q.s.ForceRelease(ctx) }

func TestLostHoldRefusesLock(t *testing.T) {
	redistest.Parallel(t)
	locktest.LostHoldRefusesLock(t, sem1)
}

func TestOperator(t *testing.T) {
	redistest.Parallel(t)
	locktest.Operator(t, sem1)
}

func TestForceUnlockResent(t *testing.T) {
	redistest.Parallel(t)
	locktest.ForceUnlockResent(t, sem1)
}

func TestEvents(t *testing.T) {
	redistest.Parallel(t)
	locktest.Events(t, sem1)
}

func TestObserverPanics(t *testing.T) {
	redistest.Parallel(t)
	locktest.ObserverPanics(t, sem1)
}

func TestHandOff(t *testing.T) {
	redistest.Parallel(t)
	locktest.HandOff(t, sem1)
}

func TestWaitSubscribed(t *testing.T) {
	redistest.Parallel(t)
	locktest.WaitSubscribed(t, sem1)
}

func TestGrantLost(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantLost(t, sem1)
}

func TestGrantToDeadWaiter(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantToDeadWaiter(t, sem1)
}

func TestGrantThenGiveUp(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantThenGiveUp(t, sem1)
}

func TestGrantToOtherCall(t *testing.T) {
	redistest.Parallel(t)
	locktest.GrantToOtherCall(t, sem1)
}

func TestStaleGrant(t *testing.T) {
	redistest.Parallel(t)
	locktest.StaleGrant(t, sem1)
}

func TestShortHeartbeatKeepsPlace(t *testing.T) {
	redistest.Parallel(t)
	locktest.ShortHeartbeatKeepsPlace(t, sem1)
}

func TestWaitBoundedByLease(t *testing.T) {
	locktest.WaitBoundedByLease(t, sem1)
}

func TestWaitExpiryMidScript(t *testing.T) {
	locktest.WaitExpiryMidScript(t, sem1)
}

func TestSyncReplicas(t *testing.T) {
	redistest.Parallel(t)
	locktest.SyncReplicas(t, sem1)
}

// TestACL runs the shared behaviours as a Redis user with exactly the
// documented ACL rules (redistest.ACLRules).
func TestACL(t *testing.T) {
	redistest.Parallel(t)
	locktest.ACL(t, sem1)
}

func TestPartialReleaseResentLate(t *testing.T) {
	redistest.Parallel(t)
	// Two permits of two, given back one at a time; the other handle asks
	// for two: it must not get them while one is still held.
	side := func(n int) func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
		return func(c *relock.Client, name string, opts ...relock.LockOption) locktest.Handle {
			s := semaphore.New(c, name, 2, opts...)
			return locktest.Side{
				Queries:     queries{s: s, c: c},
				LockFunc:    func(ctx context.Context) error { return s.Acquire(ctx, n) },
				TryLockFunc: func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, n) },
				UnlockFunc:  func(ctx context.Context) error { return s.Release(ctx, n) },
				LostFunc:    s.Lost,
				HeldFunc:    func() bool { return s.Held() > 0 },
				LostErrFunc: s.LostErr,
			}
		}
	}
	k := sem1
	k.New, k.Waiter, k.Reentrant = side(1), side(2), true
	locktest.PartialReleaseResentLate(t, k)
}

// TestPartialReleaseRetriedWithoutResends: with go-redis's retries off, a
// partial Release whose reply was lost is called again (as documented):
// it succeeds, the handle keeps the rest, and nothing is reported lost.
func TestPartialReleaseRetriedWithoutResends(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		faults := &redistest.Faults{}
		rdb := s.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
		redistest.AddHook(rdb, faults)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		sem, other := semaphore.New(c, name, 4), semaphore.New(c, name, 4)
		require.NoError(t, sem.Acquire(ctx, 2)) // loads the scripts
		require.NoError(t, sem.Release(ctx, 1))
		require.NoError(t, sem.Release(ctx, 1))
		require.NoError(t, sem.Acquire(ctx, 3))
		faults.LoseReplies(true)
		require.ErrorIs(t, sem.Release(ctx, 1), redistest.ErrInjected)
		faults.LoseReplies(false)
		require.NoError(t, sem.Release(ctx, 1), "the Release called again")
		assert.Equal(t, 2, sem.Held())
		assert.Equal(t, 2, available(t, other))
		select {
		case <-sem.Lost():
			t.Errorf("permits reported lost (%v) while Redis counts 2 for the handle", sem.LostErr())
		default:
		}
		require.NoError(t, sem.Release(ctx, 2))
		assert.Empty(t, semKeys(t, s, name))
	})
}

// TestLateTryAcquireGivesBack: with go-redis's retries off, a TryAcquire
// that Redis applies after its ctx ended (writes paused) gives its
// permits back.
func TestLateTryAcquireGivesBack(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rdb := s.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		admin := s.Admin(t)
		name := redistest.Name(t)
		sem := semaphore.New(c, name, 3)
		require.NoError(t, sem.Acquire(ctx, 1)) // loads the scripts
		require.NoError(t, sem.Release(ctx, 1))
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err())
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ok, err := sem.TryAcquire(wctx, 2)
		cancel()
		require.False(t, ok)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		time.Sleep(400 * time.Millisecond)
		assert.Equal(t, 3, available(t, sem), "a TryAcquire that landed after its ctx ended kept its permits")
	})
}

// TestForceReleaseLosesFormerHolder: after ForceRelease, the queue's head
// may be a waiting call of a former holder, granted fewer permits than the
// handle counted; when that call gives up, the handle's permits are lost
// at the next renewal (it must not go on believing it holds 3 while
// another handle takes what the capacity allows).
func TestForceReleaseLosesFormerHolder(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		ch, _ := redistest.NewClient(t, s, relock.WithPolling(time.Second), relock.WithWatchdogTimeout(900*time.Millisecond))
		co, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		h := semaphore.New(ch, name, 4, relock.WithHeartbeat(20*time.Second))
		o, op, o2 := semaphore.New(co, name, 4), semaphore.New(co, name, 4), semaphore.New(co, name, 4)
		require.NoError(t, h.Acquire(ctx, 3))
		require.NoError(t, o.Acquire(ctx, 1))
		wctx, cancel := context.WithCancel(ctx)
		done := async(func() error { return h.Acquire(wctx, 2) })
		time.Sleep(150 * time.Millisecond) // h's call is queued; its next poll is ~1 s away
		forced, err := op.ForceRelease(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		cancel()
		await(t, done, 2*time.Second, "h's cancelled Acquire")
		select {
		case <-h.Lost():
			assert.ErrorIs(t, h.LostErr(), relock.ErrLockGone)
		case <-time.After(2 * time.Second):
			t.Fatal("the force-released holder was not told")
		}
		ok, err := o2.TryAcquire(ctx, 2)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

// TestForceReleaseHolderWaiting: a holder that waits for more permits
// when they are force-released is told that its permits are gone. A holds
// 1 of 3 and waits in Acquire(2), X holds 2: after ForceRelease, A's hold
// is lost (Lost fires, its Acquire and its Release return ErrNotHeld), and
// A is not granted 2 permits that would silently merge with the 1 it
// believes it still holds (it would end up holding 3, and its Release(1)
// would succeed).
func TestForceReleaseHolderWaiting(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		// Renewals every 300 ms: X learns of the force-release at its next.
		c, rdb := newClient(t, s, relock.WithWatchdogTimeout(900*time.Millisecond))
		name := redistest.Name(t)
		a, x, op := semaphore.New(c, name, 3), semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, a.Acquire(ctx, 1))
		require.NoError(t, x.Acquire(ctx, 2))
		more := async(func() error { return a.Acquire(ctx, 2) })
		require.Eventually(t, func() bool { return rdb.ZCard(ctx, key(name)+":queue").Val() == 1 },
			5*time.Second, 2*time.Millisecond, "A never queued")

		forced, err := op.ForceRelease(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		r := await(t, more, 5*time.Second, "A's Acquire(2) after ForceRelease")
		assert.ErrorIs(t, r.Err, relock.ErrNotHeld, "A's Acquire(2) merged a grant with its taken-back permit")
		for _, h := range []*semaphore.Semaphore{x, a} {
			select {
			case <-h.Lost():
				assert.ErrorIs(t, h.LostErr(), relock.ErrLockGone)
			case <-time.After(5 * time.Second):
				t.Fatal("a force-released holder's Lost never fired")
			}
		}
		assert.Zero(t, a.Held())
		assert.ErrorIs(t, a.Release(ctx, 1), relock.ErrNotHeld, "A's release of its taken-back permit")
		assert.Equal(t, 3, available(t, op), "permits left to A after the force-release")
		assert.True(t, try(t, op, 3), "the capacity is free again")
		require.NoError(t, op.Release(ctx, 3))

		// A former holder queued behind waiters that do not all fit at
		// once: the force-release grants C, stops at D (C and D ask for 2
		// of 3), and must drop A's entry too, or D's release grants it
		// later and A ends holding 3, its loss never reported.
		queued := func(n int64) {
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, key(name)+":queue").Val() == n },
				5*time.Second, 2*time.Millisecond, "%d waiters never queued", n)
		}
		// (On a Client whose renewals, every 10 s, do not find the loss
		// first: only the grant path is tested.)
		assert.ErrorIs(t, x.Release(ctx, 2), relock.ErrNotHeld, "X's owed release of its taken-back permits")
		slow, _ := newClient(t, s)
		a, x = semaphore.New(slow, name, 3), semaphore.New(slow, name, 3)
		cc, dd := semaphore.New(slow, name, 3), semaphore.New(slow, name, 3)
		require.NoError(t, a.Acquire(ctx, 1))
		require.NoError(t, x.Acquire(ctx, 2))
		cw := async(func() error { return cc.Acquire(ctx, 2) })
		queued(1)
		dw := async(func() error { return dd.Acquire(ctx, 2) })
		queued(2)
		aw := async(func() error { return a.Acquire(ctx, 2) })
		queued(3)
		forced, err = op.ForceRelease(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		require.NoError(t, await(t, cw, 5*time.Second, "C").Err)
		require.NoError(t, cc.Release(ctx, 2))
		require.NoError(t, await(t, dw, 5*time.Second, "D").Err)
		require.NoError(t, dd.Release(ctx, 2))
		r = await(t, aw, 5*time.Second, "A's Acquire(2) queued behind D")
		assert.ErrorIs(t, r.Err, relock.ErrNotHeld, "A's Acquire(2) merged a later grant with its taken-back permit")
		assert.Zero(t, a.Held())
		assert.ErrorIs(t, a.Release(ctx, 1), relock.ErrNotHeld)
		assert.ErrorIs(t, x.Release(ctx, 2), relock.ErrNotHeld)
		assert.Equal(t, 3, available(t, op), "permits left after the force-release")
	})
}

func TestClusterNames(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterNames(t, sem1)
}

func TestClusterWakeUps(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterWakeUps(t, sem1)
}

func TestClusterReshard(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReshard(t, sem1)
}

func TestClusterReleaseMidMigration(t *testing.T) {
	redistest.Parallel(t)
	locktest.ClusterReleaseMidMigration(t, sem1)
}

func TestFinalReleaseResentAfterRenewal(t *testing.T) {
	redistest.Parallel(t)
	locktest.FinalReleaseResentAfterRenewal(t, sem1)
}

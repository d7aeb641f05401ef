package watchdog_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/watchdog"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestBatchedRenewal holds many locks of two kinds on one Client and checks
// that one renewal period costs a few round trips, not one per lock, that
// the locks stay held, and that no goroutine is started per lock.
func TestBatchedRenewal(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		// Renewed every 500 ms (600 ms lost lock 0 beside another test
		// binary: 2,000 holds under -race).
		n, lease := 2000, 1500*time.Millisecond
		if !s.Real() {
			// miniredis's Lua is far slower (and slower still under
			// -race on a loaded machine).
			n, lease = 150, 3*time.Second
		}
		rdb := s.Client(t)
		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)

		goroutines := redistest.Goroutines()
		var unlocks []func(context.Context) error
		for i := 0; i < n; i++ {
			if i%2 == 0 {
				m := mutex.New(c, fmt.Sprintf("%s.%d", name, i))
				require.NoError(t, m.Lock(ctx))
				unlocks = append(unlocks, m.Unlock)
			} else {
				l := reentrant.New(c, fmt.Sprintf("%s.%d", name, i))
				require.NoError(t, l.Lock(ctx))
				unlocks = append(unlocks, l.Unlock)
			}
		}
		assert.LessOrEqual(t, redistest.Goroutines(), goroutines, "goroutines grew with held locks")

		counter.Reset()
		const periods = 4
		time.Sleep(periods * lease / 3)
		trips := counter.RoundTrips()
		cmds := counter.Commands()
		t.Logf("%d locks, %d periods: %d round trips, %d commands", n, periods, trips, cmds)
		assert.LessOrEqual(t, trips, int64(periods+1), "round trips per renewal period")
		assert.LessOrEqual(t, cmds, int64((periods+1)*(n/watchdog.BatchSize+1)), "script calls per period")
		assert.Positive(t, trips, "no renewal at all")

		for i, unlock := range unlocks {
			require.NoError(t, unlock(ctx), "lock %d lost while watched", i)
		}
	})
}

func TestSlot(t *testing.T) {
	redistest.Parallel(t)
	// Reference values from Redis Cluster (CLUSTER KEYSLOT).
	for key, want := range map[string]uint16{
		"foo":            12182,
		"{user1000}.a":   3443,
		"{user1000}.b":   3443,
		"relock:x:{foo}": 12182,
		"{}foo":          watchdog.Slot("{}foo"),
		"123456789":      12739,
	} {
		assert.Equal(t, want, watchdog.Slot(key), key)
	}
}

// TestTransientFailures cuts the watchdog off from Redis: shorter than the
// lease, renewals are retried and the hold survives; longer, the hold is
// declared lost at its local deadline, and the lock is not recreated.
func TestTransientFailures(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		// Renewals every 500 ms, retried every 125 ms after a failure: the
		// outage below (until a round fails) ends about a second before
		// the local deadline. (With 600 ms and an outage of half of it,
		// 44 ms were left: lost on a loaded machine.)
		const lease = 1500 * time.Millisecond
		rdb := s.Client(t)
		faults := &redistest.Faults{}
		redistest.AddHook(rdb, faults)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))

		faults.Enable(true) // until a renewal round fails: at most a period (500 ms)
		require.Eventually(t, func() bool { return faults.Failed.Load() > 0 }, lease, time.Millisecond,
			"no renewal was attempted during the outage")
		faults.Enable(false)
		time.Sleep(lease)
		select {
		case <-m.Lost():
			t.Fatal("hold lost after an outage shorter than the lease")
		default:
		}
		ok, err := mutex.New(c, name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "lock expired although renewals resumed")

		faults.Enable(true)
		start := time.Now()
		select {
		case <-m.Lost():
			// By the local deadline (at most a lease away), and a timer
			// that fires late on a loaded machine (33 ms was seen).
			assert.Less(t, time.Since(start), lease+250*time.Millisecond, "loss declared long after the local deadline")
		case <-time.After(3 * lease):
			t.Fatal("hold not declared lost during a long outage")
		}
		faults.Enable(false)
		err = m.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrLeaseExpired, "no renewal confirmed in time")
		time.Sleep(lease)
		assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"), "lock still there after its lease")
	})
}

// TestLostBeforeExpiry cuts the watchdog off from Redis with a network that
// drops packets, so renewals hang instead of failing: the hold must still
// be declared lost at its local deadline, before the lock expires on the
// server and another owner can take it.
func TestLostBeforeExpiry(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const lease = 2 * time.Second
		proxy := redistest.NewProxy(t, s.Addr)
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		time.Sleep(lease / 2) // a renewal or two go through

		direct := s.Client(t)
		proxy.Blackhole(true)
		cut := time.Now()
		gone := make(chan time.Time, 1)
		go func() {
			for time.Since(cut) < 3*lease {
				if n, err := direct.Exists(ctx, "relock:mutex:{"+name+"}").Result(); err == nil && n == 0 {
					gone <- time.Now()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		select {
		case <-m.Lost():
		case <-time.After(2 * lease):
			t.Fatal("hold not declared lost while Redis was unreachable")
		}
		lost := time.Now()
		assert.Less(t, lost.Sub(cut), lease, "declared lost later than one lease after the cut")
		select {
		case at := <-gone:
			t.Fatalf("the lock expired on the server %v before the holder was told", lost.Sub(at))
		default:
		}
		select {
		case at := <-gone:
			t.Logf("told %v before the lock expired on the server", at.Sub(lost))
		case <-time.After(2 * lease):
			t.Fatal("lock never expired on the server")
		}
	})
}

// TestLostHoldStaysLost: a hold declared lost cannot be watched again (a
// re-entry in flight when it was lost must not revive its renewals).
func TestLostHoldStaysLost(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		w := watchdog.New(s.Client(t), time.Second, nil, nil)
		t.Cleanup(w.Close)
		h := watchdog.NewHold("relock:mutex:{"+redistest.Name(t)+"}", watchdog.KindString, "token")
		_ = w.Add(h, time.Now(), time.Second, true)
		assert.Equal(t, 1, w.Len())
		w.Lose(h, relock.ErrNotHeld)
		_ = w.Add(h, time.Now(), time.Second, true)
		_ = w.Lapse(h)
		assert.Equal(t, 0, w.Len(), "a lost hold is watched again")
		assert.ErrorIs(t, w.Err(h), relock.ErrNotHeld)
	})
}

// TestLateGrantRenewedSoon: a hold whose acquire was long on its way (sent
// before a server restart, answered after it) has less of its lease left
// than the next round may take to come: it is renewed at once, not lost
// while Redis answers.
func TestLateGrantRenewedSoon(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const lease = 3 * time.Second
		rdb := s.Client(t)
		w := watchdog.New(rdb, lease, nil, nil)
		t.Cleanup(w.Close)
		key := "relock:mutex:{" + redistest.Name(t) + "}"
		require.NoError(t, rdb.Set(ctx, key, "token", lease).Err())
		// Let the first round go by, so that the next is a period away.
		time.Sleep(lease/3 + 100*time.Millisecond)
		h := watchdog.NewHold(key, watchdog.KindString, "token")
		// Sent 2.4 s ago: 570 ms of the lease are left locally, and the
		// next round is 900 ms away.
		start := time.Now().Add(-lease + 600*time.Millisecond)
		require.NoError(t, rdb.PExpire(ctx, key, 600*time.Millisecond).Err())
		require.False(t, w.Add(h, start, lease, true))
		time.Sleep(800 * time.Millisecond)
		assert.NoError(t, w.Err(h), "lost before the next round")
		assert.Greater(t, rdb.PTTL(ctx, key).Val(), time.Second, "not renewed")
		w.Remove(h)
	})
}

// Gone declares a hold past its local deadline whose timer has not fired
// (a timer fires late on a starved process) quietly: once, with the loss
// the timer would have declared, Lost closed and OnLost not called; and
// reports a loss the timer declared without declaring it again.
func TestGone(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		w := watchdog.New(s.Client(t), time.Second, nil, nil)
		t.Cleanup(w.Close)
		name := redistest.Name(t)
		var mu sync.Mutex
		var told []error
		hold := func(key string, lease time.Duration) *watchdog.Hold {
			h := watchdog.NewHold("relock:mutex:{"+name+"."+key+"}", watchdog.KindString, "token")
			h.OnLost = func(cause error) {
				mu.Lock()
				told = append(told, cause)
				mu.Unlock()
			}
			require.False(t, w.Add(h, time.Now(), lease, false))
			return h
		}

		late := hold("late", 600*time.Millisecond)
		watchdog.StopTimer(w, late)
		declared, cause := w.Gone(late)
		assert.False(t, declared)
		assert.NoError(t, cause, "gone before its deadline")
		time.Sleep(650 * time.Millisecond)
		select {
		case <-late.Lost():
			t.Fatal("lost with its timer stopped, before Gone")
		default:
		}
		declared, cause = w.Gone(late)
		assert.True(t, declared, "Gone did not declare a hold past its deadline")
		assert.ErrorIs(t, cause, relock.ErrLeaseExpired)
		assert.ErrorIs(t, w.Err(late), relock.ErrLeaseExpired)
		select {
		case <-late.Lost():
		default:
			t.Fatal("Lost not closed when Gone returned")
		}
		declared, again := w.Gone(late)
		assert.False(t, declared, "declared twice")
		assert.Equal(t, cause, again)

		onTime := hold("on-time", 50*time.Millisecond)
		select {
		case <-onTime.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("the timer did not declare the hold lost")
		}
		declared, cause = w.Gone(onTime)
		assert.False(t, declared, "Gone declared a loss the timer had declared")
		assert.ErrorIs(t, cause, relock.ErrLeaseExpired)
		assert.Equal(t, 0, w.Len())
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, told, 1, "OnLost: the timer's loss only, not Gone's")
		assert.ErrorIs(t, told[0], relock.ErrLeaseExpired)
	})
}

// TestRing renews locks spread over the shards of a go-redis Ring (two
// miniredis servers: the package's real server is one): every shard gets
// the script, and every call goes to the shard that owns its keys.
func TestRing(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	a.ClockTTL(true)
	b.ClockTTL(true)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	lease := ringLease(true)
	c := relock.New(ring, relock.WithWatchdogTimeout(lease))
	t.Cleanup(func() { _ = c.Close() })
	name := redistest.Name(t)
	var ms []*mutex.Mutex
	for i := 0; i < miniLocks; i++ { // not more: see miniLocks
		m := mutex.New(c, fmt.Sprintf("%s.%d", name, i))
		require.NoError(t, m.Lock(ctx))
		ms = append(ms, m)
	}
	require.Positive(t, len(a.Keys()), "no lock on shard a")
	require.Positive(t, len(b.Keys()), "no lock on shard b")
	time.Sleep(lease + lease/2) // past the lease they were taken with
	for i, m := range ms {
		require.NoError(t, m.Unlock(ctx), "lock %d lost on a Ring", i)
	}
}

// TestCloseDuringRound: Close does not wait for a renewal round stuck on a
// server that does not answer (paused with CLIENT PAUSE WRITE, which holds
// the renewal script): it declares the hold lost and returns within a short
// grace. The round ends by itself when the server answers, the goroutine
// then exits, and the renewal that the round did apply revives nothing.
func TestCloseDuringRound(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		const lease = 900 * time.Millisecond // renewed every 300 ms
		admin := s.Client(t)
		rdb := s.Client(t)
		flight := &inFlight{}
		redistest.AddHook(rdb, flight)
		key := "relock:mutex:{" + redistest.Name(t) + "}"
		require.NoError(t, admin.Set(ctx, key, "token", lease).Err())
		w := watchdog.New(rdb, lease, nil, nil)
		t.Cleanup(w.Close)
		h := watchdog.NewHold(key, watchdog.KindString, "token")
		_ = w.Add(h, time.Now(), lease, true)
		// Two rounds answered: the function library is loaded (on this new
		// server, the first FCALL finds no library and the round loads it,
		// with FUNCTION LOAD, a write that a pause holds too) and rounds run
		// in step. (Two commands sent were taken for two rounds: the pause
		// then caught the library's load.)
		require.Eventually(t, func() bool { return flight.answered() >= 2 }, 3*time.Second, time.Millisecond)

		require.NoError(t, w.Err(h), "the hold was lost before the pause")
		// Long enough for any round caught by it to stay stuck until the
		// end of the test (go-redis's read timeout is 3 s).
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", 10000, "WRITE").Err())
		pausedAt := time.Now()
		paused := true
		unpause := func() {
			if paused {
				paused = false
				require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
			}
		}
		t.Cleanup(unpause)
		// A round stuck on the paused server: one sent since the pause, or
		// one caught by it, unanswered 100 ms after it (a round that was
		// sent before the pause and answered is no use; one caught in
		// flight used to be taken for done, and the hold's deadline then
		// passed with no round sent during the pause).
		require.Eventually(t, func() bool { return flight.stuck(pausedAt, 100*time.Millisecond) }, 5*time.Second, time.Millisecond,
			"no renewal round stuck on the paused server")
		time.Sleep(20 * time.Millisecond) // its script now waits on the paused server

		start := time.Now()
		w.Close()
		took := time.Since(start)
		assert.Less(t, took, 300*time.Millisecond, "Close waited for the stuck round")
		select {
		case <-h.Lost():
		default:
			t.Fatal("hold not declared lost by Close")
		}
		assert.ErrorIs(t, w.Err(h), relock.ErrClosed)
		select {
		case <-watchdog.Exited(w):
			t.Fatal("the goroutine exited before the round could end: the round was not stuck")
		default:
		}

		unpause()
		ended := time.Now()
		select {
		case <-watchdog.Exited(w):
			t.Logf("Close took %v; the goroutine exited %v after the server answered", took, time.Since(ended))
		case <-time.After(3 * time.Second):
			t.Fatal("the goroutine did not exit after its round ended")
		}
		pttl, err := admin.PTTL(ctx, key).Result()
		require.NoError(t, err)
		// Renewed a period (300 ms) before the stuck round began, and not
		// since, the lock would have less than 500 ms left.
		assert.Greater(t, pttl, 700*time.Millisecond, "the stuck renewal did not run: the test proves nothing")
		assert.LessOrEqual(t, pttl, lease)
		assert.ErrorIs(t, w.Err(h), relock.ErrClosed, "the round's outcome changed the lost hold")
		_ = w.Add(h, time.Now(), lease, true)
		assert.Zero(t, w.Len(), "a hold is watched after Close")
	})
}

// TestFailedClaimRoundKeepsRenewing: a claims-only round that fails must
// not stop the periodic renewals of the other holds (review: the period
// timer was stopped and never reset, and every hold was lost).
func TestFailedClaimRoundKeepsRenewing(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		const lease = 1200 * time.Millisecond // 600 ms lapsed on a loaded machine
		w := watchdog.New(rdb, lease, nil, nil)
		t.Cleanup(w.Close)
		name := redistest.Name(t)
		healthy, broken := "relock:mutex:{"+name+".a}", "relock:mutex:{"+name+".b}"
		require.NoError(t, rdb.Set(ctx, healthy, "tok", lease).Err())
		h1 := watchdog.NewHold(healthy, watchdog.KindString, "tok")
		require.False(t, w.Add(h1, time.Now(), lease, true))
		time.Sleep(50 * time.Millisecond) // the period timer runs; no round yet
		// A key of the wrong type: the claim's renewal script fails.
		require.NoError(t, rdb.RPush(ctx, broken, "x").Err())
		require.NoError(t, rdb.PExpire(ctx, broken, 5*time.Second).Err())
		h2 := watchdog.NewHold(broken, watchdog.KindString, "tok")
		require.False(t, w.Claim(h2, time.Now(), 300*time.Millisecond, lease, true))
		select {
		case <-h1.Lost():
			t.Fatalf("a healthy hold was lost after a failed claim: %v", w.Err(h1))
		case <-time.After(3 * lease):
		}
		assert.Positive(t, rdb.PTTL(ctx, healthy).Val(), "the healthy lock expired")
	})
}

// inFlight is a go-redis hook that notes when the pipelines in flight (the
// watchdog's rounds) were sent, and counts those answered.
type inFlight struct {
	mu   sync.Mutex
	next int
	sent map[int]time.Time
	ok   int // pipelines answered without an error
}

// answered returns how many pipelines were answered without an error.
func (f *inFlight) answered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ok
}

// stuck reports whether a pipeline is in flight that was sent after t, or
// that was sent before t and is still unanswered more than d after t.
func (f *inFlight) stuck(t time.Time, d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.sent {
		if at.After(t) || time.Since(t) > d {
			return true
		}
	}
	return false
}

func (f *inFlight) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f *inFlight) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f *inFlight) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f.mu.Lock()
		if f.sent == nil {
			f.sent = map[int]time.Time{}
		}
		id := f.next
		f.next++
		f.sent[id] = time.Now()
		f.mu.Unlock()
		err := next(ctx, cmds)
		f.mu.Lock()
		delete(f.sent, id)
		if err == nil {
			f.ok++
		}
		f.mu.Unlock()
		return err
	}
}

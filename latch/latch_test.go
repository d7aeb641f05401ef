package latch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/latch"
)

// The calls of these tests run in goroutines (see redistest.Async).
type result = redistest.Result

var (
	await   = redistest.Await
	pending = redistest.Pending
)

func TestMain(m *testing.M) { os.Exit(redistest.MainCluster(m)) }

var newClient = redistest.NewClient

func key(name string) string { return "relock:latch:{" + name + "}" }

// latchKeys returns the keys of the latch called name other than request
// records (which live a few seconds by design).
func latchKeys(t *testing.T, s *redistest.Server, name string) []string {
	t.Helper()
	var out []string
	for _, k := range s.Keys(t, key(name)+"*") {
		if !strings.HasPrefix(k, key(name)+":r:") {
			out = append(out, k)
		}
	}
	return out
}

func count(t *testing.T, l *latch.Latch) int {
	t.Helper()
	n, err := l.Count(context.Background())
	require.NoError(t, err)
	return n
}

func trySet(t *testing.T, l *latch.Latch, n int) bool {
	t.Helper()
	ok, err := l.TrySetCount(context.Background(), n)
	require.NoError(t, err)
	return ok
}

// testCtx is a test's context: a stall fails the test after 30 s instead
// of hanging the package until its timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitAsync(ctx context.Context, l *latch.Latch) <-chan result {
	ch := make(chan result, 1)
	go func() {
		err := l.Wait(ctx)
		ch <- result{Err: err, At: time.Now()}
	}()
	return ch
}

func TestSetCountAndCountDown(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		a, b := latch.New(c, name), latch.New(c, name)
		assert.Zero(t, count(t, a), "a latch never set")

		assert.True(t, trySet(t, a, 3))
		assert.False(t, trySet(t, b, 5), "a second TrySetCount while a count is set")
		assert.Equal(t, 3, count(t, b))
		ttl := rdb.PTTL(ctx, key(name)).Val()
		assert.True(t, ttl > latch.DefaultTTL-time.Minute && ttl <= latch.DefaultTTL, "TTL %v, want about %v", ttl, latch.DefaultTTL)

		require.NoError(t, b.CountDown(ctx))
		assert.Equal(t, 2, count(t, a))
		require.NoError(t, a.CountDown(ctx))
		require.NoError(t, b.CountDown(ctx))
		assert.Zero(t, count(t, a))
		assert.Empty(t, latchKeys(t, s, name), "the latch is deleted at zero")

		// Below zero: it stays at zero and nothing is created.
		require.NoError(t, a.CountDown(ctx))
		assert.Zero(t, count(t, a))
		assert.Empty(t, latchKeys(t, s, name), "a count-down below zero created the latch")

		// A latch that reached zero may be set again.
		assert.True(t, trySet(t, b, 1))
		require.NoError(t, a.CountDown(ctx))
		assert.Zero(t, count(t, b))
		assert.Empty(t, latchKeys(t, s, name))
	})
}

func TestWaitersWokenByPush(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		c, rdb := newClient(t, s)
		l := latch.New(c, name)
		require.True(t, trySet(t, l, 2))

		const clients, perClient = 3, 4
		var waits []<-chan result
		for i := 0; i < clients; i++ {
			wc, _ := newClient(t, s)
			for j := 0; j < perClient; j++ {
				waits = append(waits, waitAsync(ctx, latch.New(wc, name)))
			}
		}
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, l.CountDown(ctx))
		time.Sleep(100 * time.Millisecond)
		for i, w := range waits {
			pending(t, w, fmt.Sprintf("waiter %d at count 1", i))
		}
		opened := time.Now()
		require.NoError(t, l.CountDown(ctx))
		for i, w := range waits {
			r := await(t, w, 3*time.Second, fmt.Sprintf("waiter %d", i))
			require.NoError(t, r.Err)
			// A timed retry comes about a second apart: this is the push
			// (300 ms was exceeded on a loaded machine: 328 ms).
			assert.Less(t, r.At.Sub(opened), 600*time.Millisecond, "waiter %d was not woken by the count-down", i)
		}
		if s.Real() {
			assert.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, key(name)).Result()
				return err == nil && n[key(name)] == 0
			}, 2*time.Second, 10*time.Millisecond, "subscription left behind")
		}
		assert.Empty(t, latchKeys(t, s, name))
	})
}

func TestWaitWithoutCount(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A latch never set is open: Wait returns at its first read, not
		// after a timed retry (1 s apart) or a push that never comes. The
		// bound leaves room for a loaded machine (183 ms was seen under
		// -race beside other test binaries) and is still below a retry.
		ctx := testCtx(t)
		c, _ := newClient(t, s)
		start := time.Now()
		require.NoError(t, latch.New(c, redistest.Name(t)).Wait(ctx), "Wait on a latch never set")
		assert.Less(t, time.Since(start), 700*time.Millisecond, "Wait on a latch never set waited for a retry")
	})
}

func TestWaitCtxEnds(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		l := latch.New(c, name)
		require.True(t, trySet(t, l, 1))
		// A wait opens the Client's subscription connection, which stays.
		redistest.Subscribed(t, l.Wait)
		redistest.CheckGoroutines(t)

		counter := &redistest.Counter{}
		redistest.AddHook(rdb, counter)
		wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Wait(wctx)
		// At most two reads of the count (before and after subscribing;
		// one when the channel still lingers from the waits above), then
		// a timed retry about a second apart: a wait does not poll.
		assert.LessOrEqual(t, counter.Commands(), int64(3), "commands sent by a Wait of 150 ms")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.Less(t, time.Since(start), time.Second, "Wait overran its ctx")
		assert.Equal(t, 1, count(t, l), "a wait changed the count")
		if s.Real() {
			assert.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, key(name)).Result()
				return err == nil && n[key(name)] == 0
			}, 2*time.Second, 10*time.Millisecond, "subscription left behind")
		}
		require.NoError(t, l.CountDown(ctx))
	})
}

func TestTTL(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, rdb := newClient(t, s)
		name := redistest.Name(t)
		// Margins of 500 ms (100 ms, then 200 ms, failed on a loaded
		// machine); from TrySetCount, 1.4 s is past the TTL.
		const ttl = 1200 * time.Millisecond
		l := latch.New(c, name, relock.WithLease(ttl))
		require.True(t, trySet(t, l, 3))
		time.Sleep(700 * time.Millisecond)
		require.NoError(t, l.CountDown(ctx), "a count-down restores the TTL")
		assert.Greater(t, rdb.PTTL(ctx, key(name)).Val(), 800*time.Millisecond)
		time.Sleep(700 * time.Millisecond)
		assert.Equal(t, 2, count(t, l), "the TTL ran from TrySetCount despite a count-down")

		// Abandoned: the key goes, and the latch reads as opened.
		w := waitAsync(ctx, l)
		r := await(t, w, 3*time.Second, "Wait on an abandoned latch")
		require.NoError(t, r.Err)
		assert.Zero(t, count(t, l))
		time.Sleep(ttl) // request records live at most one TTL
		assert.Empty(t, s.Keys(t, key(name)+"*"), "keys left after the TTL")
	})
}

func TestConcurrentCountDown(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		const workers, each = 8, 5
		c, _ := newClient(t, s)
		require.True(t, trySet(t, latch.New(c, name), workers*each))
		waiter := waitAsync(ctx, latch.New(c, name))
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wc, _ := newClient(t, s)
			l := latch.New(wc, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < each; j++ {
					if err := l.CountDown(ctx); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		r := await(t, waiter, 3*time.Second, "Wait after every count-down")
		require.NoError(t, r.Err)
		assert.Zero(t, count(t, latch.New(c, name)))
		assert.Empty(t, latchKeys(t, s, name))
	})
}

func TestRetriedScriptsAreIdempotent(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		replay := &redistest.Replay{}
		c, rdb := newClient(t, s)
		redistest.AddHook(rdb, replay)
		name := redistest.Name(t)
		l := latch.New(c, name)
		replay.Enable(true)
		assert.True(t, trySet(t, l, 3), "a replayed TrySetCount that set the count must report true")
		require.NoError(t, l.CountDown(ctx))
		replay.Enable(false)
		assert.Equal(t, 2, count(t, l), "a replayed count-down counted twice")
		replay.Enable(true)
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, l.CountDown(ctx))
		replay.Enable(false)
		assert.Positive(t, replay.Replays.Load())
		assert.Zero(t, count(t, l))
	})
}

func TestLostReplyRepeatsRequest(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		// A call is applied but its reply is lost; calling it again repeats
		// the same request instead of applying it twice.
		ctx := testCtx(t)
		faults := &redistest.Faults{}
		c, rdb := newClient(t, s)
		redistest.AddHook(rdb, faults)
		name := redistest.Name(t)
		l, other := latch.New(c, name), latch.New(c, name)

		faults.LoseReplies(true)
		_, err := l.TrySetCount(ctx, 3)
		require.ErrorIs(t, err, redistest.ErrInjected)
		faults.LoseReplies(false)
		assert.True(t, trySet(t, l, 3), "the repeated TrySetCount that did set the count")

		faults.LoseReplies(true)
		require.ErrorIs(t, l.CountDown(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		require.NoError(t, l.CountDown(ctx), "the repeated count-down")
		assert.Equal(t, 2, count(t, other), "a count-down whose reply was lost counted twice when repeated")

		// A pending count-down is settled before another call.
		faults.LoseReplies(true)
		require.ErrorIs(t, l.CountDown(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		assert.False(t, trySet(t, l, 7))
		require.NoError(t, l.CountDown(ctx))
		assert.Zero(t, count(t, other), "3 - 3 count-downs")
	})
}

// TestOutcomeUnknownTooLate: a count-down whose reply was lost is not
// repeated once its request record may have expired (it could count
// twice): the late call fails with ErrOutcomeUnknown, sends nothing, and
// the call after it is a new count-down.
func TestOutcomeUnknownTooLate(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		faults := &redistest.Faults{}
		c, rdb := newClient(t, s)
		redistest.AddHook(rdb, faults)
		name := redistest.Name(t)
		l := latch.New(c, name, relock.WithLease(2*time.Second)) // records live 2 s
		other := latch.New(c, name)
		require.True(t, trySet(t, l, 4))
		require.NoError(t, l.CountDown(ctx)) // 3; the script is loaded

		faults.LoseReplies(true)
		require.ErrorIs(t, l.CountDown(ctx), redistest.ErrInjected) // 2
		faults.LoseReplies(false)
		time.Sleep(1600 * time.Millisecond) // past 3/4 of the record's 2 s
		err := l.CountDown(ctx)
		require.ErrorIs(t, err, latch.ErrOutcomeUnknown)
		assert.Contains(t, err.Error(), name)
		assert.Equal(t, 2, count(t, other), "the late call counted down")
		require.NoError(t, l.CountDown(ctx), "the next call, a new count-down")
		assert.Equal(t, 1, count(t, other))

		// The same for a TrySetCount.
		require.NoError(t, l.CountDown(ctx))
		faults.LoseReplies(true)
		_, err = l.TrySetCount(ctx, 2)
		require.ErrorIs(t, err, redistest.ErrInjected)
		faults.LoseReplies(false)
		time.Sleep(1600 * time.Millisecond)
		_, err = l.TrySetCount(ctx, 2)
		require.ErrorIs(t, err, latch.ErrOutcomeUnknown)
		assert.False(t, trySet(t, l, 2), "the count is set (by the request whose reply was lost)")
	})
}

func TestStalledServerRetries(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rdb := redistest.StallClient(t, s)
		admin := s.Client(t)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		l := latch.New(c, name)
		require.NoError(t, rdb.Ping(ctx).Err()) // a stall during a dial is not retried
		calls := redistest.ScriptCalls(t, admin)

		redistest.Stall(t, admin, 200*time.Millisecond)
		assert.True(t, trySet(t, l, 3), "TrySetCount across a stall")
		for want := 2; want >= 1; want-- {
			require.NoError(t, rdb.Ping(ctx).Err())
			redistest.Stall(t, admin, 200*time.Millisecond)
			require.NoError(t, l.CountDown(ctx), "count-down across a stall")
			assert.Equal(t, want, count(t, latch.New(c, name)), "count after a count-down across a stall")
		}
		assert.GreaterOrEqual(t, redistest.ScriptCalls(t, admin)-calls, int64(6),
			"the stalls did not make the scripts run more than once")
	})
}

func TestCloseDuringWait(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		redistest.CheckGoroutines(t)
		rdb := s.Client(t)
		c := relock.New(rdb)
		l := latch.New(c, redistest.Name(t))
		require.True(t, trySet(t, l, 1))
		w := waitAsync(ctx, l)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, c.Close())
		r := await(t, w, 3*time.Second, "Wait across Close")
		assert.ErrorIs(t, r.Err, relock.ErrClosed)
		assert.ErrorIs(t, l.CountDown(ctx), relock.ErrClosed)
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	s := &redistest.Server{Addr: "127.0.0.1:1"} // never dialled: input is checked first
	c := relock.New(s.Client(t))
	defer c.Close()
	cases := []struct {
		name string
		l    *latch.Latch
		want error
	}{
		{"empty name", latch.New(c, ""), relock.ErrInvalidName},
		{"brace first", latch.New(c, "}x"), relock.ErrInvalidName},
		{"oversized name", latch.New(c, strings.Repeat("n", 1025)), relock.ErrInvalidName},
		{"zero ttl", latch.New(c, "x", relock.WithLease(0)), relock.ErrInvalidOption},
		{"nil client", latch.New(nil, "x"), relock.ErrNilClient},
		{"nil redis", latch.New(relock.New(nil), "x"), relock.ErrNilClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.l.TrySetCount(ctx, 1)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, tc.l.CountDown(ctx), tc.want)
			_, err = tc.l.Count(ctx)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, tc.l.Wait(ctx), tc.want)
		})
	}
	l := latch.New(c, "x")
	for _, n := range []int{0, -1, latch.MaxCount + 1} {
		_, err := l.TrySetCount(ctx, n)
		assert.ErrorIs(t, err, relock.ErrInvalidOption, "TrySetCount(%d)", n)
	}
	assert.False(t, errors.Is(latch.New(c, "a}b{c").CountDown(ctx), relock.ErrInvalidName))
}

// TestACL: as a Redis user with exactly the documented ACL rules
// (redistest.ACLRules), a latch is set, read and counted down, and its
// waiters are woken by the push of the count-down that opens it.
func TestACL(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunACL(t, func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, s *redistest.Server) {
			ctx := testCtx(t)
			c, _ := newClient(t, s)
			name := redistest.Name(t)
			l := latch.New(c, name)
			require.True(t, trySet(t, l, 2))
			assert.False(t, trySet(t, l, 2), "a second TrySetCount while a count is set")
			w := waitAsync(ctx, latch.New(c, name))
			time.Sleep(200 * time.Millisecond)
			require.NoError(t, l.CountDown(ctx))
			assert.Equal(t, 1, count(t, l))
			pending(t, w, "a wait at count 1")
			opened := time.Now()
			require.NoError(t, l.CountDown(ctx))
			r := await(t, w, 3*time.Second, "the wait")
			require.NoError(t, r.Err)
			assert.Less(t, r.At.Sub(opened), 300*time.Millisecond, "the waiter was not woken by the count-down")
			assert.Empty(t, latchKeys(t, s, name))
		})
	})
}

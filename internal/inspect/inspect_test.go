package inspect_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

const lease = 2 * time.Second

func fp(tok string) string { return core.Fingerprint(tok) }

// waitFor waits until f is true.
func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	require.Eventually(t, f, 5*time.Second, 2*time.Millisecond, "never: %s", what)
}

// blocked starts a blocking acquire, stopped at the end of t.
func blocked(t *testing.T, lock func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = lock(ctx)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestInspectEachKind(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		keys := func(kind string) core.Keys { return core.NewKeys(kind, name) }

		m := mutex.New(c, name, relock.WithFencing())
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
		re := reentrant.New(c, name)
		require.NoError(t, re.Lock(ctx))
		require.NoError(t, re.Lock(ctx))
		t.Cleanup(func() { _ = re.Unlock(ctx); _ = re.Unlock(ctx) })
		f := fair.New(c, name)
		require.NoError(t, f.Lock(ctx))
		t.Cleanup(func() { _ = f.Unlock(ctx) })
		for i := 1; i <= 2; i++ {
			blocked(t, fair.New(c, name).Lock)
			waitFor(t, "queued", func() bool { return rdb.ZCard(ctx, keys("fair").Queue).Val() == int64(i) })
		}
		rw := rwlock.New(c, name, relock.WithFencing())
		require.NoError(t, rw.Lock(ctx))
		require.NoError(t, rw.RLock(ctx)) // a downgrade: the writer also reads
		t.Cleanup(func() { _ = rw.RUnlock(ctx); _ = rw.Unlock(ctx) })
		blocked(t, rwlock.New(c, name).Lock)
		waitFor(t, "writer waiting", func() bool { return rdb.ZCard(ctx, keys("rwlock").Queue).Val() == 1 })

		locks, err := inspect.Inspect(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, locks, 4)
		byKind := map[string]inspect.Lock{}
		for i, l := range locks {
			assert.Equal(t, inspect.Kinds[i], l.Kind)
			assert.Equal(t, name, l.Name)
			assert.True(t, l.Held, l.Kind)
			assert.Greater(t, l.TTL, time.Duration(0), l.Kind)
			assert.LessOrEqual(t, l.TTL, lease, l.Kind)
			byKind[l.Kind] = l
		}

		mv := rdb.Get(ctx, keys("mutex").Lock).Val()
		mtok, _, _ := strings.Cut(mv, ":")
		assert.Equal(t, []inspect.Owner{{Fingerprint: fp(mtok), Count: 1}}, byKind["mutex"].Owners)
		assert.True(t, byKind["mutex"].HasFence)
		assert.Equal(t, int64(1), byKind["mutex"].Fence)

		rtok := rdb.HKeys(ctx, keys("reentrant").Lock).Val()
		require.Len(t, rtok, 1)
		assert.Equal(t, []inspect.Owner{{Fingerprint: fp(rtok[0]), Count: 2}}, byKind["reentrant"].Owners)
		assert.False(t, byKind["reentrant"].HasFence)

		fl := byKind["fair"]
		ftok := rdb.HKeys(ctx, keys("fair").Lock).Val()
		require.Len(t, ftok, 1)
		assert.Equal(t, []inspect.Owner{{Fingerprint: fp(ftok[0]), Count: 1}}, fl.Owners)
		queue := queueTokens(ctx, rdb, keys("fair"))
		require.Len(t, fl.Queue, 2)
		for i, w := range fl.Queue {
			assert.Equal(t, fp(queue[i]), w.Fingerprint, "queue position %d", i)
			assert.Greater(t, w.Alive, time.Duration(0))
			assert.LessOrEqual(t, w.Alive, core.DefaultHeartbeat)
		}

		rl := byKind["rwlock"]
		assert.Equal(t, "write", rl.Mode)
		require.Len(t, rl.Owners, 1)
		o := rl.Owners[0]
		assert.Equal(t, 1, o.Read)
		assert.Equal(t, 1, o.Write)
		assert.Equal(t, 2, o.Count)
		assert.Greater(t, o.Expires, time.Duration(0))
		assert.LessOrEqual(t, o.Expires, lease)
		assert.True(t, rl.HasFence)
		wq := queueTokens(ctx, rdb, keys("rwlock"))
		require.Len(t, rl.WaitingWriters, 1)
		assert.Equal(t, fp(wq[0]), rl.WaitingWriters[0].Fingerprint)
		assert.Greater(t, rl.WaitingWriters[0].Alive, time.Duration(0))

		// What the lock packages hold is the truth: the owners match.
		for _, tok := range []string{mtok, rtok[0], ftok[0]} {
			assert.NotContains(t, fmt.Sprintf("%+v", locks), tok, "a token leaked")
		}
	})
}

func TestInspectNoLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		name := redistest.Name(t)
		// A fencing counter alone is not a lock.
		require.NoError(t, rdb.Set(ctx, core.NewKeys("mutex", name).Fence, 7, 0).Err())
		t.Cleanup(func() { rdb.Del(ctx, core.NewKeys("mutex", name).Fence) })
		_, err := inspect.Inspect(ctx, rdb, name)
		require.ErrorIs(t, err, inspect.ErrNoLock)
		assert.Contains(t, err.Error(), name)

		// Keys of a layout this package does not know fail clearly.
		require.NoError(t, rdb.Set(ctx, core.NewKeys("fair", name).Sub("queue"), "x", time.Minute).Err())
		t.Cleanup(func() { rdb.Del(ctx, core.NewKeys("fair", name).Sub("queue")) })
		_, err = inspect.Inspect(ctx, rdb, name)
		assert.ErrorContains(t, err, "not in the layout this relock knows")

		_, err = inspect.Inspect(ctx, rdb, "}bad")
		assert.ErrorIs(t, err, relock.ErrInvalidName)
	})
}

// TestInspectAfterScriptFlush: the snapshot scripts are sent with EVALSHA
// in pipelines, and loaded again when the server has lost them.
func TestInspectAfterScriptFlush(t *testing.T) {
	redistest.Exclusive(t, "SCRIPT FLUSH makes every client of the server reload its scripts")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := redistest.NewClient(t, s)
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
		for i := 0; i < 2; i++ {
			require.NoError(t, rdb.ScriptFlush(ctx).Err())
			locks, err := inspect.Inspect(ctx, rdb, name)
			require.NoError(t, err)
			require.Len(t, locks, 1)
			assert.True(t, locks[0].Held)
		}
	})
}

// The tests below write data in the layouts directly, for states the lock
// packages only pass through.

// TestRWLockExpiredHoldsDoNotCount: a hold whose expiry has passed is gone
// to the scripts, though its fields linger until the next settle.
func TestRWLockExpiredHoldsDoNotCount(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		name := redistest.Name(t)
		k := core.NewKeys("rwlock", name)
		now := serverMs(t, rdb)
		require.NoError(t, rdb.HSet(ctx, k.Lock, "writer", "dead", "dead:w", 1, "live:r", 2).Err())
		require.NoError(t, rdb.ZAdd(ctx, k.Sub("owners"),
			redis.Z{Member: "dead", Score: float64(now - 1000)},
			redis.Z{Member: "live", Score: float64(now + 60000)}).Err())
		queueWaiters(t, rdb, k, map[string]int64{"waiting": now + 30000, "late": now - 10})
		t.Cleanup(func() { rdb.Del(ctx, k.Lock, k.Sub("owners"), k.Queue, k.Timeouts) })

		locks, err := inspect.Inspect(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, locks, 1)
		l := locks[0]
		assert.True(t, l.Held)
		assert.Equal(t, "read", l.Mode, "the expired writer no longer counts")
		require.Len(t, l.Owners, 1)
		assert.Equal(t, fp("live"), l.Owners[0].Fingerprint)
		assert.Equal(t, 2, l.Owners[0].Read)
		assert.Equal(t, 2, l.Owners[0].Count)
		assert.InDelta(t, 60*time.Second, l.Owners[0].Expires, float64(2*time.Second))
		assert.Equal(t, time.Duration(-1), l.TTL, "a hash without expiry is shown as such")
		require.Len(t, l.WaitingWriters, 2, "waiters in arrival order, a lapsed one too")
		assert.Equal(t, inspect.Waiter{Fingerprint: fp("late")}, l.WaitingWriters[0], "a lapsed waiter is dead: Alive 0")
		assert.Equal(t, fp("waiting"), l.WaitingWriters[1].Fingerprint)
		assert.InDelta(t, 30*time.Second, l.WaitingWriters[1].Alive, float64(2*time.Second))

		require.NoError(t, rdb.HDel(ctx, k.Lock, "live:r").Err())
		locks, err = inspect.Inspect(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, locks, 1)
		assert.False(t, locks[0].Held)
		assert.Empty(t, locks[0].Owners)
		assert.Equal(t, "", locks[0].Mode)
	})
}

// TestFairQueueWithoutLock: a queue whose lock hash is gone is a free fair
// lock with waiters, in inspect and in list; a waiter without a deadline
// is dead (Alive 0).
func TestFairQueueWithoutLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		name := redistest.Name(t)
		k := core.NewKeys("fair", name)
		now := serverMs(t, rdb)
		queueWaiters(t, rdb, k, map[string]int64{"first": 0, "second": now + 5000})
		t.Cleanup(func() { rdb.Del(ctx, k.Queue, k.Timeouts) })

		locks, err := inspect.Inspect(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, locks, 1)
		l := locks[0]
		assert.Equal(t, "fair", l.Kind)
		assert.False(t, l.Held)
		assert.Equal(t, time.Duration(0), l.TTL)
		assert.Empty(t, l.Owners)
		require.Len(t, l.Queue, 2)
		assert.Equal(t, inspect.Waiter{Fingerprint: fp("first")}, l.Queue[0])
		assert.Equal(t, fp("second"), l.Queue[1].Fingerprint)
		assert.InDelta(t, 5*time.Second, l.Queue[1].Alive, float64(time.Second))

		listed, err := inspect.List(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, listed, 1)
		assert.Equal(t, "fair", listed[0].Kind)
		assert.Equal(t, name, listed[0].Name)
		assert.Len(t, listed[0].Queue, 2)
	})
}

// queueTokens returns the tokens of the queue of the lock with keys k, in
// order.
func queueTokens(ctx context.Context, rdb redis.UniversalClient, k core.Keys) []string {
	var out []string
	for _, e := range rdb.ZRange(ctx, k.Queue, 0, -1).Val() {
		tok, _, _ := strings.Cut(e, "|")
		out = append(out, tok)
	}
	return out
}

// queueWaiters queues waiters in the order of their names' first use:
// token -> deadline (server ms; 0: none).
func queueWaiters(t *testing.T, rdb redis.UniversalClient, k core.Keys, deadlines map[string]int64) {
	t.Helper()
	ctx := context.Background()
	names := make([]string, 0, len(deadlines))
	for tok := range deadlines {
		names = append(names, tok)
	}
	sort.Strings(names) // arrival order: alphabetical, as the tests name them
	for i, tok := range names {
		e := tok + "|w" + strconv.Itoa(i) + "|1000|0"
		require.NoError(t, rdb.ZAdd(ctx, k.Queue, redis.Z{Member: e, Score: float64(i)}).Err())
		if d := deadlines[tok]; d != 0 {
			require.NoError(t, rdb.ZAdd(ctx, k.Timeouts, redis.Z{Member: e, Score: float64(d)}).Err())
		}
	}
}

func serverMs(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// TestScanFindsLocksOnly: only main keys (and the waiter keys of a lock
// whose main key is gone) make a lock, whatever the name contains.
func TestScanFindsLocksOnly(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		p := redistest.Name(t) + "."
		tok := strings.Repeat("ab", 16)
		strs := []string{
			core.NewKeys("mutex", p+"m").Lock,
			core.NewKeys("mutex", p+"m").Record(tok),
			core.NewKeys("mutex", p+"fenceonly").Fence,
			core.NewKeys("mutex", p+"recordonly").Record(tok),
			core.NewKeys("mutex", p+"x}:r:"+tok).Lock, // a name that looks like a record
			core.NewKeys("mutex", p+"a:{b}").Lock,
			core.NewKeys("reentrant", p+"q}:queue").Lock, // a name that looks like a queue
			core.NewKeys("widget", p+"s").Lock,           // not a lock type of ours
			"relock:mutex:" + p + "nobrace",
			"other:mutex:{" + p + "o}",
		}
		hashes := []string{
			core.NewKeys("reentrant", p+"r").Lock,
			core.NewKeys("fair", p+"f").Lock,
			core.NewKeys("rwlock", p+"w").Lock,
		}
		var all []string
		for _, k := range strs {
			require.NoError(t, rdb.Set(ctx, k, "v", time.Minute).Err())
			all = append(all, k)
		}
		for _, k := range hashes {
			require.NoError(t, rdb.HSet(ctx, k, "f", "1").Err())
			all = append(all, k)
		}
		fq := core.NewKeys("fair", p+"queueonly")
		require.NoError(t, rdb.ZAdd(ctx, fq.Queue, redis.Z{Member: tok + "|w|1|0", Score: 1}).Err())
		require.NoError(t, rdb.ZAdd(ctx, fq.Timeouts, redis.Z{Member: tok + "|w|1|0", Score: 1}).Err())
		tonly := core.NewKeys("fair", p+"timeoutsonly")
		require.NoError(t, rdb.ZAdd(ctx, tonly.Sub("timeouts"), redis.Z{Member: tok, Score: 1}).Err())
		wq := core.NewKeys("rwlock", p+"wqonly")
		require.NoError(t, rdb.ZAdd(ctx, wq.Queue, redis.Z{Member: tok + "|w|1|0", Score: 1}).Err())
		all = append(all, fq.Queue, fq.Timeouts, tonly.Timeouts, wq.Queue)
		t.Cleanup(func() { rdb.Del(ctx, all...) })

		refs, err := inspect.Scan(ctx, rdb, p+"*")
		require.NoError(t, err)
		want := []inspect.Ref{
			{"mutex", p + "a:{b}"},
			{"fair", p + "f"},
			{"mutex", p + "m"},
			{"fair", p + "queueonly"},
			{"reentrant", p + "q}:queue"},
			{"reentrant", p + "r"},
			{"rwlock", p + "w"},
			{"rwlock", p + "wqonly"},
			{"mutex", p + "x}:r:" + tok},
		}
		assert.Equal(t, want, refs)

		// The pattern is matched against the whole name, exactly.
		refs, err = inspect.Scan(ctx, rdb, p+"?")
		require.NoError(t, err)
		assert.Equal(t, []inspect.Ref{{"fair", p + "f"}, {"mutex", p + "m"}, {"reentrant", p + "r"}, {"rwlock", p + "w"}}, refs)
		refs, err = inspect.Scan(ctx, rdb, p+"q")
		require.NoError(t, err)
		assert.Empty(t, refs, "%q must not match the name %q", p+"q", p+"q}:queue")
	})
}

// TestScanUsesScan: list walks the keyspace with SCAN MATCH ... COUNT
// 1000, never KEYS, and asks for nothing but what matches.
func TestScanUsesScan(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		admin := s.Client(t)
		p := redistest.Name(t)
		const unrelated = 5000
		fill(t, admin, p+":unrelated:", unrelated)
		c, _ := redistest.NewClient(t, s)
		m := mutex.New(c, p+".lock")
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })

		var mu sync.Mutex
		var cmds [][]any
		rdb := s.Client(t)
		rdb.AddHook(recorder{func(args []any) {
			mu.Lock()
			cmds = append(cmds, args)
			mu.Unlock()
		}})
		locks, err := inspect.List(ctx, rdb, p+"*")
		require.NoError(t, err)
		require.Len(t, locks, 1)
		assert.Equal(t, p+".lock", locks[0].Name)

		scans := 0
		for _, args := range cmds {
			name := strings.ToLower(fmt.Sprint(args[0]))
			assert.NotEqual(t, "keys", name)
			if name == "scan" {
				scans++
				assert.Equal(t, []any{"match", "relock:*:{" + p + "*}*", "count", int64(inspect.ScanCount)}, args[2:])
			}
		}
		if s.Real() { // miniredis answers a SCAN with all matches at once
			assert.Greater(t, scans, 1, "a keyspace of %d keys takes several SCAN calls", unrelated)
		}
	})
}

// recorder is a go-redis hook that passes every command's arguments to f.
type recorder struct{ f func(args []any) }

func (recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.f(cmd.Args())
		return next(ctx, cmd)
	}
}

func (r recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			r.f(c.Args())
		}
		return next(ctx, cmds)
	}
}

// TestGlobMatchesRedis compares the package's glob matcher with the
// server's SCAN MATCH on the same names.
func TestGlobMatchesRedis(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		prefix := redistest.Name(t) + "|"
		names := []string{"a", "b", "ab", "abc", "a}b", "a:{b}", "x*y", "x?y", "x[y", "x]y", `x\y`, "-", "a-c", "orders:42", "orders:420", "ORDERS:1", "é"}
		patterns := []string{"*", "a*", "*b", "a?", "?", "[ab]", "[^ab]", "[a-c]*", "[c-a]", "a[", "a[b", "[]a]*", `x\*y`, `x\?y`, `x\[y`, "x[\\]]y", `x\\y`, "x*", "*:4?", "*:4*", "orders:*2", "a*b*c", "**", "[-]", "[a-]*", "*}*", "a\\"}
		for _, n := range names {
			require.NoError(t, rdb.Set(ctx, prefix+n, "1", time.Minute).Err())
		}
		t.Cleanup(func() {
			for _, n := range names {
				rdb.Del(ctx, prefix+n)
			}
		})
		for _, pat := range patterns {
			var got []string
			for _, n := range names {
				if inspect.GlobMatch(pat, n) {
					got = append(got, n)
				}
			}
			var want []string
			iter := rdb.Scan(ctx, 0, escape(prefix)+pat, 1000).Iterator()
			for iter.Next(ctx) {
				want = append(want, strings.TrimPrefix(iter.Val(), prefix))
			}
			require.NoError(t, iter.Err())
			sort.Strings(got)
			sort.Strings(want)
			assert.Equal(t, want, got, "pattern %q", pat)
		}
	})
}

// escape makes s a literal glob.
func escape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fill sets n keys prefix0, prefix1... (MSET, 1000 at a time), deleted at
// the end of t.
func fill(t *testing.T, rdb redis.UniversalClient, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		var kv, keys []any
		for j := i; j < min(i+1000, n); j++ {
			k := fmt.Sprintf("%s%d", prefix, j)
			kv, keys = append(kv, k, "x"), append(keys, k)
		}
		require.NoError(t, rdb.MSet(ctx, kv...).Err())
		t.Cleanup(func() { rdb.Del(ctx, toStrings(keys)...) })
	}
}

func toStrings(a []any) []string {
	out := make([]string, len(a))
	for i, v := range a {
		out[i] = v.(string)
	}
	return out
}

// TestInspectSemaphoreAndLatch: a semaphore's capacity, holders with their
// permits and its queue with the permits each waiter asks for; a latch's
// count.
func TestInspectSemaphoreAndLatch(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		a, b := semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, a.Acquire(ctx, 1))
		require.NoError(t, b.Acquire(ctx, 2))
		t.Cleanup(func() { _ = a.Release(ctx, 1); _ = b.Release(ctx, 2) })
		w := semaphore.New(c, name, 3)
		blocked(t, func(ctx context.Context) error { return w.Acquire(ctx, 2) })
		waitFor(t, "queued", func() bool { return rdb.ZCard(ctx, core.NewKeys("semaphore", name).Queue).Val() == 1 })
		l := latch.New(c, name)
		ok, err := l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, l.CountDown(ctx))

		locks, err := inspect.Inspect(ctx, rdb, name)
		require.NoError(t, err)
		require.Len(t, locks, 2)
		sem, lt := locks[0], locks[1]
		assert.Equal(t, "semaphore", sem.Kind)
		assert.True(t, sem.Held)
		assert.Equal(t, 3, sem.Permits)
		assert.Equal(t, 3, sem.Used)
		require.Len(t, sem.Owners, 2)
		counts := []int{sem.Owners[0].Count, sem.Owners[1].Count}
		assert.ElementsMatch(t, []int{1, 2}, counts)
		require.Len(t, sem.Queue, 1)
		assert.Equal(t, 2, sem.Queue[0].Count, "the permits the waiter asks for")
		assert.Equal(t, "latch", lt.Kind)
		assert.Equal(t, 4, lt.Count)
		assert.True(t, lt.Held)
		assert.Greater(t, lt.TTL, time.Hour)
	})
}

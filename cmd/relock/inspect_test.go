package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/semaphore"
)

func TestInspect(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		sc := newScene(t, s)
		fp := core.Fingerprint

		text := relockCmd(t, "", "-redis", redisURL(s), "inspect", sc.name)
		require.Equal(t, 0, text.code)
		assert.Empty(t, text.stderr)
		out := text.stdout
		for _, want := range []string{
			`mutex "` + sc.name + `": held, ttl `,
			`reentrant "` + sc.name + `": held, ttl `,
			`fair "` + sc.name + `": held, ttl `,
			`rwlock "` + sc.name + `": read, ttl `,
		} {
			assert.Contains(t, out, want)
		}
		assert.Regexp(t, `(?m)^mutex .*, fence 1$`, out)
		assert.Regexp(t, `(?m)^  `+fp(sc.mutex)+` +1$`, out)
		assert.Regexp(t, `(?m)^  `+fp(sc.reent)+` +2$`, out, "reentrant held twice")
		assert.Regexp(t, `(?m)^  `+fp(sc.fair)+` +1$`, out)
		for i, tok := range sc.queue {
			assert.Regexp(t, `(?m)^  `+strconv.Itoa(i+1)+` +`+fp(tok)+` +\d`, out, "queue position %d", i+1)
		}
		for _, tok := range sc.readers {
			assert.Regexp(t, `(?m)^  `+fp(tok)+` +1 +0 +\d`, out, "a reader")
		}
		assert.Regexp(t, `(?m)^  `+fp(sc.writer)+` +\d`, out, "the waiting writer")

		js := relockCmd(t, "", "-redis", redisURL(s), "-json", "inspect", sc.name)
		require.Equal(t, 0, js.code)
		noTokens(t, sc, text, js)
		maps, locks := jsonLines(t, js.stdout)
		require.Len(t, locks, 4, "one object per lock and line")
		for i, kind := range []string{"mutex", "reentrant", "fair", "rwlock"} {
			l := locks[i]
			assert.Equal(t, kind, l.Kind)
			assert.Equal(t, sc.name, l.Name)
			assert.True(t, l.Held)
			assert.Greater(t, l.TTLMs, int64(0))
			assert.LessOrEqual(t, l.TTLMs, int64(2000))
			for _, f := range []string{"kind", "name", "held", "ttl_ms", "owners"} {
				assert.Contains(t, maps[i], f, kind)
			}
		}
		owners := func(l jsonLock) map[string]int {
			m := map[string]int{}
			for _, o := range l.Owners {
				m[o.Owner] = o.Count
			}
			return m
		}
		assert.Equal(t, map[string]int{fp(sc.mutex): 1}, owners(locks[0]))
		require.NotNil(t, locks[0].Fence)
		assert.Equal(t, int64(1), *locks[0].Fence)
		assert.Equal(t, map[string]int{fp(sc.reent): 2}, owners(locks[1]))
		assert.Equal(t, map[string]int{fp(sc.fair): 1}, owners(locks[2]))
		require.NotNil(t, locks[2].Queue)
		require.Len(t, *locks[2].Queue, 2)
		for i, w := range *locks[2].Queue {
			assert.Equal(t, fp(sc.queue[i]), w.Owner, "queue position %d", i+1)
			assert.Greater(t, w.AliveMs, int64(0))
		}
		// The mutex queues waiters too (its starvation mode): none here.
		require.NotNil(t, locks[0].Queue)
		assert.Empty(t, *locks[0].Queue)

		rw := locks[3]
		assert.Equal(t, "read", rw.Mode)
		assert.Equal(t, map[string]int{fp(sc.readers[0]): 1, fp(sc.readers[1]): 1}, owners(rw))
		for _, o := range rw.Owners {
			require.NotNil(t, o.Read)
			require.NotNil(t, o.Write)
			require.NotNil(t, o.ExpiresMs)
			assert.Equal(t, 1, *o.Read)
			assert.Equal(t, 0, *o.Write)
			assert.Greater(t, *o.ExpiresMs, int64(0))
		}
		require.NotNil(t, rw.WaitingWriters)
		require.Len(t, *rw.WaitingWriters, 1)
		assert.Equal(t, fp(sc.writer), (*rw.WaitingWriters)[0].Owner)
		// Only an rwlock's owners have read/write/expires_ms.
		assert.NotContains(t, maps[0]["owners"].([]any)[0], "read")
		assert.Contains(t, maps[3]["owners"].([]any)[0], "expires_ms")
	})
}

func TestList(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		sc := newScene(t, s)
		// A request record whose lock is gone, as a final release leaves
		// it (the lock renamed to it) until its Client deletes it once the
		// reply is in (core.Sweeper), within 100 ms: the scene's own
		// records were gone before list ran on a loaded machine. This
		// Client's sweeps are dropped, so the semaphore's record stays
		// (for its lease left); list must show no semaphore.
		kc, krdb := redistest.NewClient(t, s)
		redistest.AddHook(krdb, dropSweeps{})
		sem := semaphore.New(kc, sc.name, 1)
		require.NoError(t, sem.Acquire(ctx, 1))
		require.NoError(t, sem.Release(ctx, 1))
		records := s.Keys(t, "relock:*:{"+sc.name+"}:r:*")
		require.NotEmpty(t, records, "no request record, which list must skip")

		text := relockCmd(t, "", "-redis", redisURL(s), "list", sc.name)
		require.Equal(t, 0, text.code)
		lines := strings.Split(strings.TrimSpace(text.stdout), "\n")
		require.Len(t, lines, 5, "a header and one row per lock")
		assert.Regexp(t, `^KIND +NAME +STATE +OWNERS +TTL +WAITERS$`, lines[0])
		rows := []string{
			`^mutex +` + regexp.QuoteMeta(sc.name) + ` +held +` + core.Fingerprint(sc.mutex) + ` +[0-9.]+m?s +0$`,
			`^reentrant +` + regexp.QuoteMeta(sc.name) + ` +held +` + core.Fingerprint(sc.reent) + ` x2 +[0-9.]+m?s +0$`,
			`^fair +` + regexp.QuoteMeta(sc.name) + ` +held +` + core.Fingerprint(sc.fair) + ` +[0-9.]+m?s +2$`,
			`^rwlock +` + regexp.QuoteMeta(sc.name) + ` +read +[0-9a-f]{8} r1 \+1 +[0-9.]+m?s +1$`,
		}
		for i, re := range rows {
			assert.Regexp(t, re, lines[i+1])
		}
		for _, l := range lines {
			assert.LessOrEqual(t, len(l), 80, "fits an 80-column terminal: %q", l)
		}

		// Another lock, under a longer name: a pattern picks names.
		c, _ := redistest.NewClient(t, s)
		other := mutex.New(c, sc.name+".other")
		require.NoError(t, other.Lock(ctx))
		t.Cleanup(func() { _ = other.Unlock(ctx) })

		js := relockCmd(t, "", "-redis", redisURL(s), "-json", "list", sc.name)
		require.Equal(t, 0, js.code)
		_, locks := jsonLines(t, js.stdout)
		require.Len(t, locks, 4)
		for i, kind := range []string{"mutex", "reentrant", "fair", "rwlock"} {
			assert.Equal(t, kind, locks[i].Kind)
			assert.Equal(t, sc.name, locks[i].Name)
		}
		js = relockCmd(t, "", "-redis", redisURL(s), "-json", "list", sc.name+"*")
		require.Equal(t, 0, js.code)
		_, locks = jsonLines(t, js.stdout)
		require.Len(t, locks, 5)
		assert.Equal(t, sc.name+".other", locks[4].Name)
		noTokens(t, sc, text, js)
		after := relockCmd(t, "", "list", sc.name+"*", "-redis", redisURL(s), "-json")
		require.Equal(t, 0, after.code, "flags after the pattern")
		_, again := jsonLines(t, after.stdout)
		require.Len(t, again, len(locks), "flags after the pattern")
		for i := range locks {
			assert.Equal(t, locks[i].Kind+" "+locks[i].Name, again[i].Kind+" "+again[i].Name)
			assert.Equal(t, locks[i].Owners[0].Owner, again[i].Owners[0].Owner)
		}
		twice := relockCmd(t, "", "-redis", redisURL(s), "list", sc.name, "-json", "--", "-x")
		assert.Equal(t, 2, twice.code, "a second pattern after --")
		assert.Contains(t, twice.stderr, "too many arguments")

		none := relockCmd(t, "", "-redis", redisURL(s), "list", sc.name+".nothing*")
		assert.Equal(t, 0, none.code)
		assert.Equal(t, `no lock matches "`+sc.name+`.nothing*"`+"\n", none.stdout)
	})
}

// TestListManyKeys: list walks a keyspace of many unrelated keys with
// SCAN, never KEYS (counted by the real server's INFO commandstats).
func TestListManyKeys(t *testing.T) {
	redistest.Exclusive(t, "INFO commandstats counts every test's commands")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		admin := s.Client(t)
		name := redistest.Name(t)
		n := 20000
		if !s.Real() {
			n = 2000 // miniredis ignores COUNT (one SCAN answers all) and is slow with many keys
		}
		fill(t, admin, name+":unrelated:", n)
		c, _ := redistest.NewClient(t, s)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })

		var keys, scans int64
		if s.Real() {
			keys, scans = redistest.CommandCalls(t, admin, "keys"), redistest.CommandCalls(t, admin, "scan")
		}
		r := relockCmd(t, "", "-redis", redisURL(s), "-json", "list", name+"*")
		require.Equal(t, 0, r.code)
		_, locks := jsonLines(t, r.stdout)
		require.Len(t, locks, 1)
		assert.Equal(t, name, locks[0].Name)
		if s.Real() {
			assert.Equal(t, keys, redistest.CommandCalls(t, admin, "keys"), "KEYS was called")
			assert.GreaterOrEqual(t, redistest.CommandCalls(t, admin, "scan")-scans, int64(20), "20,000 keys take 20+ SCAN calls of COUNT 1000")
		}
	})
}

func TestWatch(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })

		r := relockCmd(t, "", "-redis", redisURL(s), "watch", "-interval", "20ms", "-count", "3", name)
		require.Equal(t, 0, r.code)
		assert.Equal(t, 3, strings.Count(r.stdout, "Every 20ms: relock watch"))
		assert.Equal(t, 3, strings.Count(r.stdout, `mutex "`+name+`": held`))

		r = relockCmd(t, "", "-redis", redisURL(s), "-json", "-interval", "20ms", "watch", "-count", "2", name)
		require.Equal(t, 0, r.code)
		_, locks := jsonLines(t, r.stdout)
		assert.Len(t, locks, 2)

		// A refresh without the lock says so, and watch goes on.
		require.NoError(t, m.Unlock(ctx))
		r = relockCmd(t, "", "-redis", redisURL(s), "watch", "-interval", "20ms", "-count", "2", name)
		require.Equal(t, 0, r.code)
		assert.Equal(t, 2, strings.Count(r.stdout, `no lock named "`+name+`"`))

		// Without -count, watch runs until its ctx is cancelled (SIGINT):
		// here once it has shown two refreshes (a fixed 150 ms was less
		// than its start took on a loaded machine), or after 10 s.
		ctx, cancel := context.WithCancel(ctx)
		defer time.AfterFunc(10*time.Second, cancel).Stop()
		out := &refreshes{want: 2, reached: cancel}
		var errw strings.Builder
		code := runContext(ctx, []string{"-redis", redisURL(s), "watch", "-interval", "20ms", name}, strings.NewReader(""), out, &errw)
		returned := time.Now()
		assert.Equal(t, 0, code)
		assert.GreaterOrEqual(t, strings.Count(out.String(), "Every 20ms"), 2)
		if at, ok := out.reachedAt(); assert.True(t, ok, "watch never showed two refreshes") {
			assert.Less(t, returned.Sub(at), time.Second, "watch ran on after its ctx was cancelled")
		}
		assert.Empty(t, errw.String())
	})
}

// dropSweeps is a go-redis hook that drops the DELs of request records
// (core.Sweeper's: every key a record's) as if they were done, so that
// records stay for their TTL.
type dropSweeps struct{}

func (dropSweeps) DialHook(next redis.DialHook) redis.DialHook { return next }

func (dropSweeps) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if sweep(cmd) {
			return nil
		}
		return next(ctx, cmd)
	}
}

func (dropSweeps) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, c := range cmds {
			if !sweep(c) {
				rest = append(rest, c)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

// sweep reports whether cmd is a DEL of request records only.
func sweep(cmd redis.Cmder) bool {
	args := cmd.Args()
	if !strings.EqualFold(cmd.Name(), "del") || len(args) < 2 {
		return false
	}
	for _, a := range args[1:] {
		if k, ok := a.(string); !ok || !strings.Contains(k, "}:r:") {
			return false
		}
	}
	return true
}

// refreshes is the output of a relock watch: once it holds want refreshes
// ("Every ..." headers) it calls reached, once.
type refreshes struct {
	want    int
	reached func()
	mu      sync.Mutex
	b       strings.Builder
	at      time.Time
}

func (r *refreshes) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.b.Write(p)
	if r.at.IsZero() && strings.Count(r.b.String(), "Every ") >= r.want {
		r.at = time.Now()
		r.reached()
	}
	return n, err
}

func (r *refreshes) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// reachedAt returns when the output reached want refreshes, if it did.
func (r *refreshes) reachedAt() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at, !r.at.IsZero()
}

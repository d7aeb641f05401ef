package main

// The command's tests run it in-process (run, with buffers) against
// miniredis and a real redis-server (redistest.Run), on locks made with the
// lock packages. A main package cannot be imported, so they live in it.
// run's tests start it as a process: this test binary, re-executed as the
// command (asCommand) or as a child for it to run (asChild, in
// runlock_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case asCommand:
			main0(os.Args[2:])
		case asChild:
			os.Exit(child(os.Args[2:]))
		}
	}
	os.Exit(redistest.Main(m))
}

// main0 is main with args.
func main0(args []string) { os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr)) }

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// relockCmd runs the command with args and stdin.
func relockCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return relockCmdIn(t, strings.NewReader(stdin), args...)
}

// relockCmdIn runs the command with args, reading stdin.
func relockCmdIn(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errw bytes.Buffer
	start := time.Now()
	code := run(args, stdin, &out, &errw)
	r := result{code: code, stdout: out.String(), stderr: errw.String(), took: time.Since(start)}
	t.Logf("relock %s: exit %d in %v\n%s%s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
	return r
}

func redisURL(s *redistest.Server) string { return "redis://" + s.Addr }

// jsonLines decodes one JSON object per line, as generic maps (to check
// field names) and as jsonLock.
func jsonLines(t *testing.T, s string) ([]map[string]any, []jsonLock) {
	t.Helper()
	var maps []map[string]any
	var locks []jsonLock
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "line %q", line)
		var l jsonLock
		require.NoError(t, json.Unmarshal([]byte(line), &l), "line %q", line)
		maps, locks = append(maps, m), append(locks, l)
	}
	return maps, locks
}

// scene is a lock of every type under one name, as a test finds them:
//   - a mutex (with fencing) held,
//   - a reentrant lock held twice by one owner,
//   - a fair lock held, with two waiters queued,
//   - an rwlock held by two readers, with a writer waiting,
//
// and the owner tokens that Redis holds (read directly), which no output
// may contain.
type scene struct {
	name    string
	mutex   string   // the mutex owner's token
	reent   string   // the reentrant owner's token
	fair    string   // the fair holder's token
	queue   []string // the fair queue's tokens, head first
	readers []string // the rwlock readers' tokens
	writer  string   // the waiting writer's token
}

func (sc *scene) tokens() []string {
	return append([]string{sc.mutex, sc.reent, sc.fair, sc.writer}, append(sc.queue, sc.readers...)...)
}

func newScene(t *testing.T, s *redistest.Server) *scene {
	t.Helper()
	ctx := context.Background()
	c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(2*time.Second))
	name := redistest.Name(t)
	keys := func(kind string) core.Keys { return core.NewKeys(kind, name) }
	sc := &scene{name: name}

	m := mutex.New(c, name, relock.WithFencing())
	require.NoError(t, m.Lock(ctx))
	t.Cleanup(func() { _ = m.Unlock(ctx) })
	sc.mutex, _, _ = strings.Cut(rdb.Get(ctx, keys("mutex").Lock).Val(), ":")

	re := reentrant.New(c, name)
	require.NoError(t, re.Lock(ctx))
	require.NoError(t, re.Lock(ctx))
	t.Cleanup(func() { _ = re.Unlock(ctx); _ = re.Unlock(ctx) })
	sc.reent = only(t, rdb.HKeys(ctx, keys("reentrant").Lock).Val())

	f := fair.New(c, name)
	require.NoError(t, f.Lock(ctx))
	t.Cleanup(func() { _ = f.Unlock(ctx) })
	sc.fair = only(t, rdb.HKeys(ctx, keys("fair").Lock).Val())
	for i := 1; i <= 2; i++ {
		background(t, fair.New(c, name).Lock)
		require.Eventually(t, func() bool { return rdb.ZCard(ctx, keys("fair").Queue).Val() == int64(i) },
			5*time.Second, 2*time.Millisecond, "waiter %d never queued", i)
	}
	sc.queue = queueTokens(ctx, rdb, keys("fair"))

	for i := 0; i < 2; i++ {
		r := rwlock.New(c, name)
		require.NoError(t, r.RLock(ctx))
		t.Cleanup(func() { _ = r.RUnlock(ctx) })
	}
	for _, f := range rdb.HKeys(ctx, keys("rwlock").Lock).Val() {
		if tok, ok := strings.CutSuffix(f, ":r"); ok {
			sc.readers = append(sc.readers, tok)
		}
	}
	require.Len(t, sc.readers, 2)
	background(t, rwlock.New(c, name).Lock)
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, keys("rwlock").Queue).Val() == 1 },
		5*time.Second, 2*time.Millisecond, "writer never waiting")
	sc.writer = only(t, queueTokens(ctx, rdb, keys("rwlock")))
	return sc
}

func only(t *testing.T, a []string) string {
	t.Helper()
	require.Len(t, a, 1)
	return a[0]
}

// background runs a blocking acquire until the end of t.
func background(t *testing.T, lock func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = lock(ctx)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// noTokens fails t if any output shows an owner token.
func noTokens(t *testing.T, sc *scene, outs ...result) {
	t.Helper()
	for _, tok := range sc.tokens() {
		require.NotEmpty(t, tok)
		for _, o := range outs {
			require.NotContains(t, o.stdout+o.stderr, tok, "an owner token was shown")
		}
	}
}

// fill sets n keys prefix0, prefix1... (MSET, 1000 at a time), deleted at
// the end of t.
func fill(t *testing.T, rdb redis.UniversalClient, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		var kv []any
		var keys []string
		for j := i; j < min(i+1000, n); j++ {
			k := prefix + strconv.Itoa(j)
			kv, keys = append(kv, k, "x"), append(keys, k)
		}
		require.NoError(t, rdb.MSet(ctx, kv...).Err())
		t.Cleanup(func() { rdb.Del(ctx, keys...) })
	}
}

// queueTokens returns the tokens of the queue of the lock with keys k, in
// order (entries are "<token>|<wait id>|<claim ms>|<fencing>").
func queueTokens(ctx context.Context, rdb redis.UniversalClient, k core.Keys) []string {
	var out []string
	for _, e := range rdb.ZRange(ctx, k.Queue, 0, -1).Val() {
		tok, _, _ := strings.Cut(e, "|")
		out = append(out, tok)
	}
	return out
}

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	shared.stop()
	os.Exit(code)
}

// master is one independent Redis of a test: a miniredis, or a real
// redis-server (the test's own, or shared with the other tests of the
// binary) reached through a proxy of the test's own that can blackhole it.
type master struct {
	addr  string // what clients dial (the proxy of a real server)
	mini  *miniredis.Miniredis
	proxy *redistest.Proxy
	admin *redis.Client // direct, bypassing the proxy
	// shared: the server is used by other tests too (see sharedReal).
	shared bool
}

// masters are the N masters of one test.
type masters []*master

// run runs f on five miniredis and on five real redis-servers (shared by
// the tests of the binary, see sharedReal); side by side in a test marked
// redistest.Parallel.
func run(t *testing.T, f func(t *testing.T, ms masters)) {
	t.Helper()
	redistest.Subtest(t, "miniredis", func(t *testing.T) { f(t, startMinis(t, 5)) })
	redistest.Subtest(t, "redis", func(t *testing.T) { f(t, sharedReal(t)) })
}

// runOwn is run for tests that stop masters: the real servers are the
// test's own.
func runOwn(t *testing.T, f func(t *testing.T, ms masters)) {
	t.Helper()
	redistest.Subtest(t, "miniredis", func(t *testing.T) { f(t, startMinis(t, 5)) })
	redistest.Subtest(t, "redis", func(t *testing.T) { f(t, startReal(t, 5)) })
}

// runReal runs f on five real redis-servers only (shared).
func runReal(t *testing.T, f func(t *testing.T, ms masters)) {
	t.Helper()
	redistest.Subtest(t, "redis", func(t *testing.T) { f(t, sharedReal(t)) })
}

func startMinis(t *testing.T, n int) masters {
	var ms masters
	for range n {
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		admin := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = admin.Close() })
		ms = append(ms, &master{addr: m.Addr(), mini: m, admin: admin})
	}
	return ms
}

// startReal starts n real redis-servers of t's own: for tests that stop
// them (down).
func startReal(t *testing.T, n int) masters {
	var ms masters
	for range n {
		s := redistest.StartServer(t)
		p := redistest.NewProxy(t, s.Addr)
		ms = append(ms, &master{addr: p.Addr, proxy: p, admin: s.Node(t)})
	}
	return ms
}

// sharedReal returns five real redis-servers shared by the tests of the
// binary (started on first use, stopped by TestMain), each behind a proxy
// of t's own. Tests keep apart by their lock names; they must not stop the
// servers (down refuses).
func sharedReal(t *testing.T) masters {
	t.Helper()
	addrs := shared.get(t)
	var ms masters
	for _, a := range addrs {
		p := redistest.NewProxy(t, a)
		admin := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = admin.Close() })
		ms = append(ms, &master{addr: p.Addr, proxy: p, admin: admin, shared: true})
	}
	return ms
}

// shared are the real redis-servers of sharedReal.
var shared servers

type servers struct {
	once  sync.Once
	dir   string
	cmds  []*exec.Cmd
	addrs []string
	err   error
}

func (s *servers) get(t *testing.T) []string {
	t.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "relock-redlock-"); s.err != nil {
			return
		}
		for i := range 5 {
			dir := filepath.Join(s.dir, strconv.Itoa(i))
			if s.err = os.Mkdir(dir, 0o700); s.err != nil {
				return
			}
			var cmd *exec.Cmd
			var addr string
			if cmd, addr, s.err = launch(dir); s.err != nil {
				return
			}
			s.cmds, s.addrs = append(s.cmds, cmd), append(s.addrs, addr)
		}
	})
	if s.err != nil {
		if _, err := exec.LookPath("redis-server"); err != nil {
			redistest.Real(t) // skips, or fails with RELOCK_REQUIRE_REDIS=1
		}
		t.Fatalf("shared redis-servers: %v", s.err)
	}
	return s.addrs
}

func (s *servers) stop() {
	for _, c := range s.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// launch starts a redis-server without persistence on a free loopback
// port, with its files in dir, and waits until it answers. A port picked
// free can be taken by another process before the server binds it: a few
// tries.
func launch(dir string) (*exec.Cmd, string, error) {
	var err error
	for range 5 {
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, "", err
		}
		addr := l.Addr().String()
		_ = l.Close()
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		if err = cmd.Start(); err != nil {
			return nil, "", err
		}
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if err = c.Ping(context.Background()).Err(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		_ = c.Close()
		if err == nil {
			return cmd, addr, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return nil, "", fmt.Errorf("redis-server did not start: %w", err)
}

func (ms masters) real() bool { return ms[0].mini == nil }

// clients returns one relock.Client per master, as one process has them,
// on go-redis clients with short timeouts (an unreachable master is given
// up on within half a second), each with a connection open already (a
// first request also dials: on a loaded machine, that can take longer
// than a short attempt timeout).
func (ms masters) clients(t testing.TB, opts ...relock.Option) []*relock.Client {
	t.Helper()
	return ms.clientsWith(t, nil, opts...)
}

// clientsWith is clients with hooks[i], if set, on master i's go-redis
// client.
func (ms masters) clientsWith(t testing.TB, hooks []redis.Hook, opts ...relock.Option) []*relock.Client {
	t.Helper()
	var cs []*relock.Client
	for i, m := range ms {
		rdb := redis.NewClient(&redis.Options{Addr: m.addr, DialTimeout: 500 * time.Millisecond,
			ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		if i < len(hooks) && hooks[i] != nil {
			rdb.AddHook(hooks[i])
		}
		_ = rdb.Ping(context.Background()).Err()
		c := relock.New(rdb, opts...)
		t.Cleanup(func() {
			_ = c.Close()
			_ = rdb.Close()
		})
		cs = append(cs, c)
	}
	return cs
}

// blackhole makes the masters i (real servers) drop every byte.
func (ms masters) blackhole(on bool, idx ...int) {
	for _, i := range idx {
		ms[i].proxy.Blackhole(on)
	}
}

// down stops master i for good (SHUTDOWN NOSAVE; a miniredis is closed):
// connections to it are refused from then on.
func (ms masters) down(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		switch m := ms[i]; {
		case m.shared:
			t.Fatalf("master %d is shared by other tests: stop only servers of the test's own (startReal)", i)
		case m.mini != nil:
			m.mini.Close()
		default:
			_ = m.admin.ShutdownNoSave(context.Background()).Err() // the reply is a closed connection
		}
	}
}

// key is the lock key of name, the same on every master.
func key(name string) string { return "relock:" + redlock.Kind + ":{" + name + "}" }

// plant sets a key of another owner for name on the masters idx.
func (ms masters) plant(t *testing.T, name string, ttl time.Duration, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if err := ms[i].admin.Set(context.Background(), key(name), "someone-else", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// unplant deletes name's lock key on the masters idx.
func (ms masters) unplant(t *testing.T, name string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if err := ms[i].admin.Del(context.Background(), key(name)).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// holders returns on which masters name's lock key exists.
func (ms masters) holders(t *testing.T, name string, idx ...int) []int {
	t.Helper()
	if len(idx) == 0 {
		for i := range ms {
			idx = append(idx, i)
		}
	}
	var out []int
	for _, i := range idx {
		n, err := ms[i].admin.Exists(context.Background(), key(name)).Result()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		if n == 1 {
			out = append(out, i)
		}
	}
	return out
}

// holdersSoon returns holders once it is want, or after a second:
// requests to masters that answered late (given up on by the call that
// sent them) still run after the call returned.
func (ms masters) holdersSoon(t *testing.T, name string, want []int, idx ...int) []int {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		got := ms.holders(t, name, idx...)
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clean checks that on the masters idx (all when none) name has no lock
// key and no queue, and that every key left of it (request records) has
// a TTL. It gives late requests a second to land (see holdersSoon).
func (ms masters) clean(t *testing.T, name string, idx ...int) {
	t.Helper()
	if len(idx) == 0 {
		for i := range ms {
			idx = append(idx, i)
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		problems := ms.problems(t, name, idx)
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ms masters) problems(t *testing.T, name string, idx []int) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, i := range idx {
		a := ms[i].admin
		iter := a.Scan(ctx, 0, key(name)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			switch k {
			case key(name), key(name) + ":queue", key(name) + ":timeouts":
				out = append(out, fmt.Sprintf("master %d: %s left behind", i, k))
				continue
			}
			if ttl := a.PTTL(ctx, k).Val(); ttl < 0 {
				out = append(out, fmt.Sprintf("master %d: %s has no TTL (%v)", i, k, ttl))
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
	}
	return out
}

// within fails t unless c is closed within d.
func within(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// noQueue checks that no master has a queue of name: a blocking Lock that
// gave up left its queues.
func (ms masters) noQueue(t *testing.T, name string) {
	t.Helper()
	for i := range ms {
		assert.Zero(t, ms[i].admin.Exists(context.Background(), key(name)+":queue").Val(), "queue left on master %d", i)
	}
}

// checkGoroutines fails t if, once t's cleanups ran (Clients closed), more
// goroutines run the code of this package, relock's internals or go-redis
// than before t (redistest.CheckGoroutines does not see this package's).
// Requests to unreachable masters end within their timeouts: it waits
// up to 3 s.
func checkGoroutines(t *testing.T) {
	t.Helper()
	redistest.CheckGoroutinesOf(t, "goroutines", func(g string) bool {
		return strings.Contains(g, "relock-go/relock/redlock.") || redistest.Library(g)
	})
}

// allExpire checks that every key of name on every master has a TTL,
// while the lock is held or waited for.
func (ms masters) allExpire(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	for i, m := range ms {
		keys, err := m.admin.Keys(ctx, key(name)+"*").Result()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		for _, k := range keys {
			if ttl := m.admin.PTTL(ctx, k).Val(); ttl <= 0 {
				t.Errorf("master %d: %s has no TTL (%v)", i, k, ttl)
			}
		}
	}
}

// lock locks m for a test's setup, trying again (up to 5 times) when the
// masters answered slower than the attempt timeout of a short lease (a
// tenth of it): a loaded machine, or miniredis compiling its Lua under
// -race.
func lock(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	err := m.Lock(context.Background())
	for i := 0; i < 5 && errors.Is(err, redlock.ErrNoQuorum); i++ {
		t.Logf("lock: %v (trying again)", err)
		err = m.Lock(context.Background())
	}
	require.NoError(t, err)
}

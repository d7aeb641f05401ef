// Package redistest runs relock's tests on both an embedded miniredis and a
// real redis-server.
//
// Run(t, f) runs f twice, as subtests "miniredis" and "redis". The real
// server is started once per test binary on a free loopback port (from
// redis-server on PATH) and stopped by Main. When redis-server is missing,
// the "redis" subtests skip with a message; with RELOCK_REQUIRE_REDIS=1 they
// fail instead. The miniredis instance is new for each subtest, with TTLs
// that run down with the wall clock (ClockTTL), so time-based tests behave
// as on a real server.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Server is one Redis a test runs against.
type Server struct {
	Addr string
	// Mini is the embedded server, nil for a real redis-server.
	Mini *miniredis.Miniredis
}

// Real reports whether this is a real redis-server.
func (s *Server) Real() bool { return s.Mini == nil }

// Client returns a go-redis client on the server, closed at the end of t.
// opts may adjust its options (timeouts, retries, hooks are added after).
func (s *Server) Client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: s.Addr}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Keys returns the keys matching pattern (SCAN, not KEYS, on a real
// server shared by the package's tests).
func (s *Server) Keys(t testing.TB, pattern string) []string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	var out []string
	iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan %q: %v", pattern, err)
	}
	return out
}

// Name returns a lock name unique to this test run.
func Name(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return n + "." + hex.EncodeToString(b[:])
}

// Run runs f on miniredis and on the real redis-server, as subtests.
func Run(t *testing.T, f func(t *testing.T, s *Server)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		f(t, &Server{Addr: m.Addr(), Mini: m})
	})
	t.Run("redis", func(t *testing.T) {
		f(t, Real(t))
	})
}

// RunReal runs f only on the real redis-server, for behaviour miniredis
// does not have (CLIENT PAUSE, DEBUG SLEEP, real pub/sub timing).
func RunReal(t *testing.T, f func(t *testing.T, s *Server)) {
	t.Helper()
	t.Run("redis", func(t *testing.T) { f(t, Real(t)) })
}

var (
	realOnce sync.Once
	real     *Server
	realErr  error
	realCmd  *exec.Cmd
	realDir  string
)

// Real returns the package's real redis-server, starting it on first use.
// It skips t (or fails it, with RELOCK_REQUIRE_REDIS=1) when the server
// cannot be had.
func Real(t testing.TB) *Server {
	t.Helper()
	realOnce.Do(func() { real, realErr = start() })
	if realErr != nil {
		unavailable(t, realErr)
	}
	return real
}

// Main runs the tests and stops the real server (if one was started).
// Use it as: func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if realCmd != nil {
		_ = realCmd.Process.Kill()
		_ = realCmd.Wait()
	}
	if realDir != "" {
		_ = os.RemoveAll(realDir)
	}
	return code
}

func start() (*Server, error) {
	dir, err := os.MkdirTemp("", "relock-redis-")
	if err != nil {
		return nil, err
	}
	realDir = dir
	cmd, addr, err := launch(dir)
	if err != nil {
		return nil, err
	}
	realCmd = cmd
	return &Server{Addr: addr}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(addr string, cmd *exec.Cmd) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 5 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, " | ")
}

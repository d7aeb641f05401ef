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
//
// Inside RunOn(t, s, label, f), every Run and RunReal runs on s only:
// RunACL runs shared tests as a restricted ACL user (ACLRules), and a
// TLS-only server (StartTLSServer) runs them over TLS.
//
// The tests mostly wait on timers, so they run side by side: a test marked
// Parallel runs beside the binary's other parallel tests, and so do the
// subtests of its Run, RunReal and Subtest calls. A test that touches what
// other tests share (the real server or the cluster as a whole: CLIENT
// PAUSE, DEBUG SLEEP, SCRIPT FLUSH, INFO counters; the process's
// goroutines) is not marked, runs alone, and says so with Exclusive, which
// CheckGoroutines, Stall and CommandCalls call for it; RunOwn gives such a
// test a server of its own instead.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
	// Username and Password, when set, are the credentials of the clients
	// that Client returns (a restricted ACL user: see RunACL). Keys and
	// Admin always connect as the default, unrestricted user.
	Username, Password string
	// TLS, when set, is the TLS configuration of every client of the
	// server (one that speaks only TLS: see StartTLSServer).
	TLS *tls.Config
	// Cluster, when set, makes this a Redis Cluster (see RunCluster):
	// Client and Admin return cluster clients, Keys scans every master,
	// and Addr is one of its nodes.
	Cluster *Cluster

	// label names the subtest of Run and RunReal inside RunOn.
	label string
}

// Real reports whether this is a real redis-server.
func (s *Server) Real() bool { return s.Mini == nil }

// Client returns a go-redis client on the server (a cluster client on a
// Cluster), closed at the end of t. opts may adjust its options
// (timeouts, retries; on a Cluster those that ClusterOptions share);
// hooks are added after.
func (s *Server) Client(t testing.TB, opts ...func(*redis.Options)) redis.UniversalClient {
	t.Helper()
	o := s.Options()
	for _, f := range opts {
		f(o)
	}
	var c redis.UniversalClient
	if s.Cluster != nil {
		c = redis.NewClusterClient(clusterOptions(s.Cluster, o))
	} else {
		c = redis.NewClient(o)
	}
	withLateHooks(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Node returns a go-redis client of this one server, closed at the end of
// t, for what only a single server has (its own connections, WAIT,
// replication); it fails t on a Cluster.
func (s *Server) Node(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	if s.Cluster != nil {
		t.Fatal("redistest: Node of a Cluster")
	}
	return s.Client(t, opts...).(*redis.Client)
}

// SingleOnly skips t on a Cluster: what it tests needs one server (a
// proxy or a process in front of its one address, its own commands).
func (s *Server) SingleOnly(t testing.TB, why string) {
	t.Helper()
	if s.Cluster != nil {
		t.Skipf("single server only: %s", why)
	}
}

// Keys returns the keys matching pattern (SCAN, not KEYS, on a real
// server shared by the package's tests). It fails t if the scan fails: in
// a condition of assert.Eventually, which runs in a goroutine that may
// outlive t, use ScanKeys.
func (s *Server) Keys(t testing.TB, pattern string) []string {
	t.Helper()
	out, err := s.ScanKeys(pattern)
	if err != nil {
		t.Fatalf("scan %q: %v", pattern, err)
	}
	return out
}

// ScanKeys is Keys without a test: it returns the scan's error.
func (s *Server) ScanKeys(pattern string) ([]string, error) {
	var out []string
	scan := func(c *redis.Client) error {
		iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
		for iter.Next(context.Background()) {
			out = append(out, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if s.Cluster != nil {
		cc := redis.NewClusterClient(clusterOptions(s.Cluster, s.adminOptions()))
		defer cc.Close()
		var mu sync.Mutex
		err = cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(c)
		})
	} else {
		c := redis.NewClient(s.adminOptions())
		defer c.Close()
		err = scan(c)
	}
	return out, err
}

// Name returns a lock name unique to this test run.
func Name(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return n + "." + hex.EncodeToString(b[:])
}

// Run runs f on miniredis and on the real redis-server, as subtests
// (inside RunOn, on its server only). In a test marked Parallel the
// subtests run in parallel: Run returns before they have run, so the
// caller must not depend on them afterwards (but in its t.Cleanup).
func Run(t *testing.T, f func(t *testing.T, s *Server)) {
	t.Helper()
	if s := scoped(t); s != nil {
		Subtest(t, s.label, func(t *testing.T) { f(t, s) })
		return
	}
	Subtest(t, "miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		f(t, &Server{Addr: m.Addr(), Mini: m})
	})
	Subtest(t, "redis", func(t *testing.T) {
		f(t, Real(t))
	})
	if onCluster && !testing.Short() {
		Subtest(t, "cluster", func(t *testing.T) {
			f(t, ClusterServer(t))
		})
	}
}

// onCluster is set by MainCluster: Run runs on the cluster too.
var onCluster bool

// ClusterServer returns the test binary's cluster (RealCluster) as a
// Server.
func ClusterServer(t testing.TB) *Server {
	t.Helper()
	c := RealCluster(t)
	return &Server{Addr: c.Nodes[0].Addr, Cluster: c}
}

// RunOwn runs f, as subtest "redis", on a real redis-server of its own
// (StartServer), for a test that pauses, stalls or flushes its server or
// counts its commands (INFO): on the binary's shared server that would
// disturb, or be disturbed by, the tests that run beside it.
func RunOwn(t *testing.T, f func(t *testing.T, s *Server)) {
	t.Helper()
	Subtest(t, "redis", func(t *testing.T) { f(t, StartServer(t)) })
}

// RunReal runs f only on the real redis-server, for behaviour miniredis
// does not have (CLIENT PAUSE, DEBUG SLEEP, real pub/sub timing); inside
// RunOn, on its server. In a test marked Parallel, as Run.
func RunReal(t *testing.T, f func(t *testing.T, s *Server)) {
	t.Helper()
	if s := scoped(t); s != nil {
		Subtest(t, s.label, func(t *testing.T) { f(t, s) })
		return
	}
	Subtest(t, "redis", func(t *testing.T) { f(t, Real(t)) })
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
	realOnce.Do(func() {
		if real, realErr = start(); realErr == nil {
			addShared(real.Addr)
		}
	})
	if realErr != nil {
		unavailable(t, realErr)
	}
	return real
}

// MainCluster is Main for a test binary whose Run tests also run, as
// subtests "cluster", on a Redis Cluster of three masters with a replica
// each, shared by the binary (RunReal tests, for faults of a single
// server, do not); not with -short.
//
// The cluster is started as the binary starts, beside its first tests.
func MainCluster(m *testing.M) int {
	onCluster = true
	return Main(m)
}

// Main runs the tests and stops the real server (if one was started).
// Use it as: func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }.
//
// Unless go test is given -parallel, the binary runs Parallelism parallel
// tests at once (see Parallel).
func Main(m *testing.M) int {
	defaultParallel()
	if onCluster && !testing.Short() {
		go clusterOnce.Do(formCluster)
	}
	code := m.Run()
	if onCluster && !testing.Short() {
		clusterOnce.Do(formCluster) // waits for the start above
	}
	if cluster != nil {
		cluster.Stop()
	}
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

// ports are the ports freePort has handed out in this process.
var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// freePort returns a free loopback port that this process has not had
// before: the servers of tests that run side by side must not get one
// another's ports, nor one of a server that stopped (the nodes of a
// cluster keep calling a dead node's address, and took a new server there
// into their cluster).
func freePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	var held []net.Listener // ports had before, kept bound until one is new
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !ports.used[port] {
			_ = l.Close()
			ports.used[port] = true
			return port, nil
		}
		held = append(held, l)
	}
}

// waitReady waits until the server at addr answers PING (over TLS with
// tlsCfg, if not nil).
func waitReady(addr string, tlsCfg *tls.Config, pid int) error {
	o := &redis.Options{Addr: addr, MaxRetries: -1}
	if tlsCfg != nil {
		o.TLSConfig = tlsCfg.Clone()
	}
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := c.Info(context.Background(), "server").Result()
		if err == nil {
			// Another process's server may have taken the port between
			// freePort and this one's bind (the test binaries start theirs
			// side by side): it answers too, and is not ours.
			if !strings.Contains(info, "\r\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
				return fmt.Errorf("%s is another process's server (ours, pid %d, could not bind it)", addr, pid)
			}
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

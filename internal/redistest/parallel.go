package redistest

import (
	"flag"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Parallelism is how many parallel tests a test binary of Main runs at
// once when go test is not given -parallel (whose default, GOMAXPROCS, is
// 2 on CI's machine). The tests mostly wait on timers (leases,
// heartbeats, renewal periods), not on the CPU; but with go test running
// two binaries at once, 16 kept both cores busy and made the timing
// tests late (leases lapsed, wake-ups missed their bounds), and 8 did not.
const Parallelism = 8

// Tests marked Parallel run beside each other; a test that touches what
// other tests share (the package's real server or cluster: CLIENT PAUSE,
// DEBUG SLEEP, SCRIPT FLUSH, counters in INFO; or the whole process: its
// goroutines, a package variable), or that keeps a core busy under a
// timing bound, declares itself Exclusive and must then run alone. go
// test runs the top-level tests that are not parallel one at a time,
// before the parallel ones: an Exclusive test is one that is not marked
// Parallel, nor inside one that is. Parallel and Exclusive check it, and
// fail a test that would break it.
var par struct {
	mu        sync.Mutex
	running   map[string]bool // tests marked Parallel, running
	exclusive map[string]int  // Exclusive tests running (how many calls)
}

// Parallel marks t as a test that may run beside the binary's other
// parallel tests (t.Parallel): it uses names of its own (Name) and touches
// nothing that other tests share but through them. The Run and RunReal
// calls in it (or in its subtests) then run their servers' subtests in
// parallel too. It fails t if an Exclusive test is running.
func Parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	register(t)
}

// register records the running parallel test t until its end.
func register(t *testing.T) {
	t.Helper()
	name := t.Name()
	par.mu.Lock()
	if par.running == nil {
		par.running = map[string]bool{}
	}
	ex := names(par.exclusive)
	par.running[name] = true
	par.mu.Unlock()
	t.Cleanup(func() {
		par.mu.Lock()
		delete(par.running, name)
		par.mu.Unlock()
	})
	if len(ex) > 0 {
		t.Fatalf("redistest: parallel test %s runs beside %s, which must run alone (redistest.Exclusive)", name, strings.Join(ex, ", "))
	}
}

// Exclusive declares that t touches what the binary's other tests share
// (why says what), so that it must run alone: t must not be marked
// Parallel, nor be inside a test that is, and no parallel test may run
// meanwhile. It fails t if one does.
func Exclusive(t testing.TB, why string) {
	t.Helper()
	name := t.Name()
	par.mu.Lock()
	var beside []string
	for p := range par.running {
		beside = append(beside, p)
	}
	if par.exclusive == nil {
		par.exclusive = map[string]int{}
	}
	par.exclusive[name]++
	par.mu.Unlock()
	t.Cleanup(func() {
		par.mu.Lock()
		if par.exclusive[name]--; par.exclusive[name] == 0 {
			delete(par.exclusive, name)
		}
		par.mu.Unlock()
	})
	if len(beside) > 0 {
		sort.Strings(beside)
		t.Fatalf("redistest: %s must run alone (%s), beside parallel tests %s: do not mark it (or a test around it) redistest.Parallel",
			name, why, strings.Join(beside, ", "))
	}
}

// parallelTest reports whether t is, or is inside, a test marked
// Parallel.
func parallelTest(t testing.TB) bool {
	name := t.Name()
	par.mu.Lock()
	defer par.mu.Unlock()
	for {
		if par.running[name] {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// Subtest runs f as t's subtest name (t.Run), in parallel with its
// siblings if t is, or is inside, a test marked Parallel. Then it returns
// before f has run, as Run does: the caller must not depend on f's work
// afterwards (but in its t.Cleanup, which runs after its subtests).
func Subtest(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !parallelTest(t) {
		t.Run(name, f)
		return
	}
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		register(t)
		f(t)
	})
}

func names(m map[string]int) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// defaultParallel sets -test.parallel to Parallelism unless it was given.
func defaultParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(Parallelism))
	}
}

// shared holds the addresses of the binary's shared servers: the real
// server (Real) and the cluster's nodes (RealCluster).
var shared sync.Map // string -> bool

func addShared(addr string) { shared.Store(addr, true) }

// sharedClient reports whether c is a client of a server that the
// binary's tests share (or of a kind this package does not know).
func sharedClient(c redis.UniversalClient) bool {
	var addrs []string
	switch c := c.(type) {
	case *redis.Client:
		addrs = []string{c.Options().Addr}
	case *redis.ClusterClient:
		addrs = c.Options().Addrs
	default:
		return true
	}
	for _, a := range addrs {
		if _, ok := shared.Load(a); ok {
			return true
		}
	}
	return false
}

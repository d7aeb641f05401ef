package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	if js := os.Getenv(workerEnv); js != "" {
		os.Exit(runWorker(js)) // a worker process of a run
	}
	os.Exit(m.Run())
}

var durationFlag = flag.Duration("chaos.duration", 0,
	"workload time of TestChaos over all lock types and lease modes (default "+defaultDuration.String()+
		", or $RELOCK_CHAOS_DURATION; -short: a fifth)")

// defaultDuration is the CI run: 6 s per lock type and lease mode (ten
// runs, about 80 s of wall time with the workers' starts and stops), long
// enough for each fault lane to go through all its kinds more than once.
const defaultDuration = 60 * time.Second

// The runs' settings.
const (
	workers       = 5                      // processes
	owners        = 2                      // handles per lock name per process
	lockNames     = 3                      // per lock type; the first is fenced
	capacity      = 3                      // semaphore permits
	watchdogLease = time.Second            // relock.WithWatchdogTimeout
	fixedLease    = 500 * time.Millisecond // relock.WithLease
	heartbeat     = time.Second            // relock.WithHeartbeat
	redisTimeout  = 500 * time.Millisecond // the workers' go-redis read/write/dial timeouts
)

var kinds = []string{"mutex", "reentrant", "fair", "rwlock", "semaphore"}

func totalDuration(t *testing.T) time.Duration {
	t.Helper()
	if *durationFlag > 0 {
		return *durationFlag
	}
	if s := os.Getenv("RELOCK_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("RELOCK_CHAOS_DURATION=%q: want a duration such as 10m", s)
		}
		return d
	}
	if testing.Short() {
		return defaultDuration / 5
	}
	return defaultDuration
}

// TestChaos runs every lock type, with the watchdog and with fixed leases,
// under every fault, and judges the records (see the package doc).
func TestChaos(t *testing.T) {
	per := totalDuration(t) / time.Duration(2*len(kinds))
	var sum summary
	for _, kind := range kinds {
		for _, lease := range []time.Duration{0, fixedLease} {
			name := kind + "/watchdog"
			if lease > 0 {
				name = kind + "/lease"
			}
			t.Run(name, func(t *testing.T) {
				r := runChaos(t, config{kind: kind, lease: lease, duration: per, faults: true})
				sum.add(r)
				check(t, r)
			})
		}
	}
	t.Logf("chaos, %v of workload:\n%s", totalDuration(t), sum.table())
	if os.Getenv("RELOCK_CHAOS_FAULTS") == "" && totalDuration(t) >= defaultDuration && len(sum.runs) == 2*len(kinds) {
		// The turns carry over from run to run: all the runs of this
		// length inject every kind, or a lane is stuck.
		for _, k := range append(append([]string(nil), workerFaults...), serverFaults...) {
			if n := sumFaults(sum, k); n == 0 {
				t.Errorf("fault %s was never injected", k)
			}
		}
	}
}

func sumFaults(s summary, kind string) int {
	n := 0
	for _, r := range s.runs {
		n += r.faults[kind]
	}
	return n
}

// TestOracleCatchesBrokenLock is the negative control: workers that enter
// their critical sections without taking the lock must be reported.
func TestOracleCatchesBrokenLock(t *testing.T) {
	r := runChaos(t, config{kind: "mutex", duration: 2 * time.Second, broken: true})
	if len(r.v.violations) == 0 {
		t.Fatalf("the judge found no violation among %d unlocked critical sections", r.v.holds)
	}
	t.Logf("%d violations among %d unlocked critical sections; the first:\n%v", len(r.v.violations), r.v.holds, r.v.violations[0])
}

// config is one run.
type config struct {
	kind     string
	lease    time.Duration // 0: the watchdog
	duration time.Duration
	faults   bool
	broken   bool // negative control
}

// runChaos starts a redis-server of its own (append-only, fsync always,
// so that it can be restarted with or without its data), the workers,
// the faults and the TTL sampler; stops it all after the duration; and
// judges.
func runChaos(t *testing.T, cfg config) result {
	redistest.CheckGoroutines(t)
	checkOwnGoroutines(t)
	srv := redistest.StartManaged(t, shmDir(t), "--appendonly", "yes", "--appendfsync", "always")
	admin := srv.Node(t, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
	probe := srv.Node(t, func(o *redis.Options) { o.ReadTimeout = time.Second; o.MaxRetries = -1 })

	run := randomID()
	var names []string
	for i := 0; i < lockNames; i++ {
		names = append(names, fmt.Sprintf("chaos-%s-%d", run, i))
	}
	pattern := "relock:" + cfg.kind + ":{chaos-" + run + "-*"
	lease := cfg.lease
	if lease == 0 {
		lease = watchdogLease
	}
	fenced := 1
	if cfg.kind == "semaphore" {
		fenced = 0 // relock.WithFencing is ignored there
	}
	f := newFleet(t, spec{Kind: cfg.kind, Names: names, Fenced: fenced, Lease: cfg.lease, Watchdog: watchdogLease,
		Heartbeat: heartbeat, Capacity: capacity, Owners: owners, Broken: cfg.broken, Timeout: redisTimeout}, srv.Addr)
	for i := 0; i < workers; i++ {
		f.spawn()
	}
	waitReady(t, f)

	s := newSampler(probe, pattern, 100*time.Millisecond)
	in := &injector{f: f, srv: srv, admin: admin, kind: cfg.kind, names: names, lease: lease, timeout: redisTimeout,
		rnd: mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 1)), counts: map[string]int{}, stops: map[string][]window{}}
	start := time.Now()
	until := start.Add(cfg.duration)
	if cfg.faults {
		var lanes sync.WaitGroup
		lanes.Add(2)
		go func() {
			defer lanes.Done()
			in.lane(until, workerFaults, &workerTurn, 200*time.Millisecond, 600*time.Millisecond)
		}()
		go func() {
			defer lanes.Done()
			in.lane(until, serverFaults, &serverTurn, 300*time.Millisecond, time.Second)
		}()
		lanes.Wait()
	} else {
		time.Sleep(cfg.duration)
	}
	took := time.Since(start)
	f.stop(5 * time.Second)
	stopped := time.Since(start) - took
	s.close()

	left, err := leftovers(probe, pattern, max(lease, heartbeat)+time.Second)
	cleared := time.Since(start) - took - stopped
	if err != nil {
		t.Errorf("looking for keys left over: %v", err)
	}
	// A hold's key lives at least its lease, or the claim lease of a
	// hand-over (half the heartbeat), from when its acquire began.
	sure := min(lease, heartbeat/2)
	rules := rules{capacity: 1, pauseMin: lease / 2, late: selfPause, minTTL: sure - sure/100 - 2*time.Millisecond}
	if cfg.kind == "semaphore" {
		rules.capacity = capacity
	}
	v := judge(f.order, f.evidence(in.stops, in.losses, in.kept), rules)

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bad {
		t.Error(b)
	}
	for _, e := range in.errs {
		t.Error("injecting a fault: " + e)
	}
	mode := "watchdog"
	if cfg.lease > 0 {
		mode = cfg.lease.String()
	}
	r := result{kind: cfg.kind, lease: mode, took: took, workers: f.next, v: v, faults: in.counts, faultLog: in.log,
		samples: s.samples, sampledKeys: s.keys, noTTL: s.noTTL, leftovers: left, losses: f.losses, failures: f.failures}
	perLock := map[string]int{}
	for _, h := range f.order {
		perLock[h.lock]++
	}
	for _, n := range names {
		if perLock[n] == 0 && !cfg.broken {
			t.Errorf("lock %s was never acquired", n)
		}
	}
	hit, aimed := in.landed(f.order)
	landed := ""
	for _, k := range []string{"kill", "stop", "cut"} {
		landed += fmt.Sprintf(" %s=%d/%d", k, hit[k], aimed[k])
	}
	t.Logf("%s/%s: %d acquisitions in %v (per lock: %v); workers stopped in %v, keys gone %v later; faults: %s; aimed at a holder, landed inside:%s; "+
		"holds lost: %s; acquires failed: %s; not entered (lost at once): %d; unlocks: %s; "+
		"stale-holder overlaps: %d, in %d of them the paused holder's Lost had not fired when it left; "+
		"holds inside across a restart with persistence: %d; holds lost before their lease: %d; "+
		"unlocks that said gone after a lost reply: %d",
		cfg.kind, mode, v.holds, took.Round(time.Millisecond), perLock, stopped.Round(time.Millisecond),
		cleared.Round(time.Millisecond), counts(in.counts), landed, counts(f.losses),
		counts(f.failures), f.skipped, counts(f.unlocks), len(v.stale), v.staleUntold, v.spanned, len(v.lostEarly), v.goneAfterRetry)
	return r
}

// check fails t on whatever the judge or the key checks found, and logs
// the expected overlaps so that they are not hidden.
func check(t *testing.T, r result) {
	t.Helper()
	bad := append(append(append([]finding(nil), r.v.violations...), r.v.fenceBack...), r.v.lostEarly...)
	for _, f := range bad {
		t.Errorf("%v", f)
	}
	if len(bad) > 0 {
		t.Logf("faults of the run:\n\t%s", strings.Join(r.faultLog, "\n\t"))
	}
	for _, k := range r.noTTL {
		t.Errorf("key without TTL: %s", k)
	}
	for _, k := range r.leftovers {
		t.Errorf("left over one lease after the workers were gone: %s", k)
	}
	if r.samples == 0 {
		t.Errorf("no TTL sample was taken")
	} else if r.sampledKeys == 0 {
		t.Errorf("%d TTL samples saw no key of the locks: the sampler looks in the wrong place", r.samples)
	}
	for what, fs := range map[string][]finding{"stale holder": r.v.stale, "overstay": r.v.overstay, "after data loss": r.v.afterLoss} {
		for i, f := range fs {
			if i == 3 {
				t.Logf("(%d more %s overlaps)", len(fs)-3, what)
				break
			}
			t.Logf("expected, %s: %v", what, f)
		}
	}
}

// waitReady waits until every worker has said it is ready.
func waitReady(t *testing.T, f *fleet) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		ready := 0
		for _, w := range f.workers {
			if w.ready {
				ready++
			}
		}
		n := len(f.workers)
		bad := append([]string(nil), f.bad...)
		f.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("a worker failed: %v", bad)
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers ready after 30 s", ready, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shmDir returns a directory in memory for the server's append-only file
// when the host has one (appendfsync always is then cheap), else "".
func shmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "relock-chaos-")
	if err != nil {
		return ""
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// checkOwnGoroutines fails t if, at its end, more goroutines run code of
// this package than at its start: a fleet's readers, a fault lane, the
// sampler left behind. (redistest.CheckGoroutines counts relock's
// internal packages and go-redis only.)
func checkOwnGoroutines(t *testing.T) {
	t.Helper()
	redistest.CheckGoroutinesOf(t, "goroutines of package chaos", func(g string) bool {
		return strings.Contains(g, "relock-go/relock/chaos.")
	})
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// watchdogWorkers is how many goroutines acquire and release the locks of
// the watchdog scenario.
const watchdogWorkers = 16

// Watchdog holds cfg.WatchdogLocks locks (distinct names) from one Conn
// whose renewal keeps them alive (the kind's Conn must be a Renewer), and
// reports the Redis commands and round trips per renewal period while
// nothing else runs, the goroutines added by holding a tenth of the locks
// and all of them, and the client's memory per held lock. Kinds without
// automatic renewal do not apply.
//
// On miniredis, TTLs stand still during the scenario (nothing in it is
// meant to expire; a hold's lapse by the server's clock, as the rwlock's
// and the semaphore's, still counts). With TTLs running (ClockTTL),
// miniredis sorts every key it has on every command, each command a script
// calls included: one renewal round of 500 rwlock holds (1,500 keys) took
// 0.5-1.2 s instead of 15 ms, acquires queued behind it as long, and holds
// whose acquire had waited missed the local deadline of the scenario's 3 s
// lease (acquire sent + 2.97 s), as the watchdog must then declare.
func Watchdog(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioWatchdog}
	if m := cfg.Server.Mini; m != nil {
		m.ClockTTL(false)
		defer m.ClockTTL(true)
	}
	n := cfg.WatchdogLocks
	if k.Peer && cfg.PeerWatchdogLocks > 0 {
		n = cfg.PeerWatchdogLocks
	}
	cnt := &Counter{}
	conn, err := k.Open(cfg.Server, cnt, OpenOptions{WatchdogTimeout: cfg.WatchdogTimeout})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer conn.Close()
	rn, ok := conn.(Renewer)
	if !ok {
		res.Err = "no automatic renewal"
		return res
	}
	st := &WatchdogStats{Locks: n, Period: rn.RenewPeriod()}

	// Warm up (scripts, pool), then take the baseline.
	if err := cycleOnce(ctx, conn.New(UniqueName("watchdog.warm"))); err != nil {
		res.Err = err.Error()
		return res
	}
	time.Sleep(50 * time.Millisecond)
	g0 := goroutines(cfg.Server)
	m0 := memInUse()

	cfg.started()
	prefix := UniqueName("watchdog")
	owners := make([]Locker, n)
	for i := range owners {
		owners[i] = conn.New(prefix + "." + strconv.Itoa(i))
	}
	start := time.Now()
	var acquired atomic.Int64
	lock := func(l Locker) error {
		// The names are free: a Lock that waits this long is stuck.
		lctx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
		defer cancel()
		if err := l.Lock(lctx); err != nil {
			if lctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("%w: Lock of a free lock did not return within %v", errStalled, cfg.WaitTimeout)
			}
			return err
		}
		acquired.Add(1)
		return nil
	}
	failed := func(err error) Result {
		res.Err = fmt.Sprintf("lock (%d of %d acquired): %v", acquired.Load(), n, err)
		res.Stalled = errors.Is(err, errStalled)
		_ = forAll(owners[:acquired.Load()], func(l Locker) error { _ = l.Unlock(ctx); return nil })
		return res
	}
	tenth := max(1, n/10)
	if err := forAll(owners[:tenth], lock); err != nil {
		return failed(err)
	}
	time.Sleep(50 * time.Millisecond)
	st.GoroutinesTenth = goroutines(cfg.Server) - g0
	if err := forAll(owners[tenth:], lock); err != nil {
		return failed(err)
	}
	st.AcquireSecs = time.Since(start).Seconds()
	time.Sleep(50 * time.Millisecond)
	st.GoroutinesAll = goroutines(cfg.Server) - g0
	st.BytesPerLock = float64(memInUse()-m0) / float64(n)

	// Let one renewal round pass (its first one loads the script), then
	// count over whole periods while all locks are held.
	time.Sleep(st.Period)
	c0 := cnt.Snapshot()
	cnt.StartTrace()
	win := cfg.Server.openWindow(ctx)
	t0 := time.Now()
	time.Sleep(time.Duration(cfg.WatchdogPeriods) * st.Period)
	d := cnt.Snapshot().Sub(c0)
	trips := cnt.StopTrace()
	srvTime := win.close(ctx, 0)
	st.Window = time.Since(t0)
	periods := float64(st.Window) / float64(st.Period)
	st.CmdsPerPeriod = float64(d.Commands) / periods
	st.TripsPerPeriod = float64(d.RoundTrips) / periods
	st.CmdsPerSec = float64(d.Commands) / st.Window.Seconds()
	if rounds := bursts(trips, st.Period/4); len(rounds) >= 2 {
		st.Rounds = len(rounds)
		st.RoundInterval = rounds[len(rounds)-1].start.Sub(rounds[0].start) / time.Duration(len(rounds)-1)
		var c, t int64
		for _, r := range rounds {
			c += r.cmds
			t += r.trips
		}
		st.CmdsPerRound = float64(c) / float64(len(rounds))
		st.TripsPerRound = float64(t) / float64(len(rounds))
	}
	if srvTime != nil && srvTime.Calls > 0 {
		// Script time per hold renewed: every hold once per renewal period.
		st.Server = serverTime(cmdStat{srvTime.Calls, srvTime.Usec}, int64(periods*float64(n)))
	}

	var lost atomic.Int64
	_ = forAll(owners, func(l Locker) error {
		if err := l.Unlock(ctx); err != nil {
			lost.Add(1)
		}
		return nil
	})
	st.Lost = lost.Load()
	if st.Lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d holds were lost (unlock failed)", st.Lost, n))
	}
	res.Ops = int64(n)
	res.Seconds = time.Since(start).Seconds()
	res.Watchdog = st
	return res
}

// burst is a group of round trips close together in time: one renewal
// round of a watchdog that renews everything at once.
type burst struct {
	start       time.Time
	cmds, trips int64
}

// bursts groups trips separated by less than gap.
func bursts(trips []Trip, gap time.Duration) []burst {
	var out []burst
	var last time.Time
	for _, t := range trips {
		if len(out) == 0 || t.At.Sub(last) >= gap {
			out = append(out, burst{start: t.At})
		}
		b := &out[len(out)-1]
		b.cmds += t.Commands
		b.trips++
		last = t.At
	}
	return out
}

// forAll runs f on every owner from a few goroutines; it returns the first
// error and stops early on it.
func forAll(owners []Locker, f func(Locker) error) error {
	var (
		next   atomic.Int64
		failed atomic.Bool
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
	)
	for w := 0; w < watchdogWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(len(owners)) {
					return
				}
				if err := f(owners[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// memInUse is the heap and stack in use after a garbage collection.
func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// goroutines counts this process's goroutines, leaving out those of an
// embedded miniredis (one per connection, on the server side), which are
// not the client's.
func goroutines(srv *Server) int {
	if srv.Real() {
		return runtime.NumGoroutine()
	}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "github.com/alicebob/miniredis") {
			n++
		}
	}
	return n
}

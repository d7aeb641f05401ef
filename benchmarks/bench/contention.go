package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// maxConns is how many processes (Conns) contenders are spread over: up to
// this many, round-robin.
const maxConns = 4

// Contention runs c owners (spread over up to four Conns) that lock one
// name in a loop, each holding it for cfg.Hold. It reports acquisitions
// per second, the wait for the lock (p50/p99/max of completed waits; waits
// still unfinished at the end count in MaxWait), Jain's fairness index over
// per-owner acquisitions, and mutual-exclusion violations seen by an
// in-process checker (must be 0).
func Contention(ctx context.Context, cfg Config, k Kind, c int) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioContention, Contenders: c}
	contend(ctx, cfg, k, &res, contendSpec{owners: c, hold: cfg.Hold})
	return res
}

// HandoffContended measures the hand-off under sustained contention:
// cfg.ContendedOwners owners (spread over up to four Conns) lock one name
// in a loop, each holding it for cfg.ContendedHold, and the sample is the
// time from a release call to the next holder's Lock returning. With that
// many owners each waits several holds, long enough for locks that hand
// themselves over only to a starving waiter to do so. Latency is the
// hand-off to another owner: one sample per release call, up to the next
// acquisition by an owner other than the releasing one. A releasing owner
// that takes the lock again itself (a barging lock's releaser often wins)
// hands nothing over, so its release is counted up to the acquisition by
// another owner that eventually follows. The time to the next holder
// whoever it is, the releaser included, is ContentionStats.NextHolder.
// The wait, fairness and violations are reported as by Contention.
func HandoffContended(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioHandoffContended, Contenders: cfg.ContendedOwners}
	contend(ctx, cfg, k, &res, contendSpec{owners: cfg.ContendedOwners, hold: cfg.ContendedHold, serverTime: true})
	if res.Contention != nil {
		res.Latency = res.Contention.Handoff
	}
	return res
}

// contendSpec is one run of owners contending for one name.
type contendSpec struct {
	owners int
	hold   time.Duration
	// warmup is how many acquisitions happen before the window opens
	// (at most warmupMax); figures count only the window's.
	warmup int64
	// serverTime measures the server's script time in the window.
	serverTime bool
	// mid, if set, runs in the middle of a timed window with the lock's
	// name.
	mid func(ctx context.Context, name string)
	// cost, if set, reads the server's and this process's costs at both
	// ends of the window (ContentionStats.Cost); idle is what a window of
	// that length costs with no acquisition in it.
	cost *costProbe
	idle func(time.Duration) costSample
}

// warmupMax bounds a contention run's warm-up.
const warmupMax = 10 * time.Second

// contend runs spec for k and fills res: figures, ContentionStats (with
// the hand-off from each release to the next holder), or Err.
func contend(ctx context.Context, cfg Config, k Kind, res *Result, spec contendSpec) {
	c := spec.owners
	cnt := &Counter{}
	conns, err := openConns(k, cfg.Server, cnt, min(c, maxConns))
	if err != nil {
		res.Err = err.Error()
		return
	}
	defer closeConns(conns)

	name := UniqueName("contention")
	owners := make([]Locker, c)
	for i := range owners {
		owners[i] = conns[i%len(conns)].New(name)
	}
	// Warm up one owner per Conn (scripts, pools).
	for i := 0; i < len(conns); i++ {
		if err := cycleOnce(ctx, owners[i]); err != nil {
			res.Err = err.Error()
			return
		}
	}

	st := &ContentionStats{Hold: spec.hold, Counts: make([]int64, c), Conns: len(conns)}
	var (
		phase      atomic.Int32 // 0 warm-up, 1 window, 2 after it
		inside     atomic.Int32
		violations atomic.Int64
		errs       atomic.Int64
		tickets    atomic.Int64
		acquired   atomic.Int64 // every acquisition, warm-up included
		lastAcq    atomic.Int64 // unix ns of the latest acquisition
		longestGap atomic.Int64
		maxWait    atomic.Int64
		held       atomic.Int64 // total time inside in the window, ns
		// Release calls of the window not yet followed by another
		// owner's acquisition (one owner's streak), oldest first. Only
		// the holder touches it; the mutex orders the hand-over.
		pendMu    sync.Mutex
		pending   []release
		unlockErr atomic.Value
	)
	tickets.Store(int64(cfg.Ops))
	stopAfter := cfg.Duration
	if cfg.Ops > 0 {
		stopAfter = cfg.WaitTimeout + time.Duration(cfg.Ops)*time.Second
	}

	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		c0    Count
		s0    int64
		subOK bool
		win   *window
		start time.Time
	)
	var acqOpen int64
	var cost0, cost1 costReading
	var costErr error
	readCost := func(r *costReading) {
		if spec.cost != nil && costErr == nil {
			*r, costErr = spec.cost.read(ctx, cnt)
		}
	}
	open := func() {
		cfg.started()
		readCost(&cost0)
		acqOpen = acquired.Load()
		c0 = cnt.Snapshot()
		s0, subOK = cfg.Server.PubSubCalls(ctx)
		if spec.serverTime {
			win = cfg.Server.openWindow(ctx)
		}
		start = time.Now()
		lastAcq.Store(start.UnixNano())
		phase.Store(1)
	}
	if spec.warmup == 0 {
		open()
	}
	waits := make([][]time.Duration, c)
	handoffs := make([][]time.Duration, c)
	next := make([][]time.Duration, c)
	self := make([]int64, c)
	releases := make([][]time.Duration, c)
	var wg sync.WaitGroup
	for i := range owners {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := owners[i]
			for stop.Err() == nil {
				// With an operation budget, each acquisition of the window
				// takes a ticket; one whose Lock began in the warm-up takes
				// it when it gets the lock.
				ticket := false
				if cfg.Ops > 0 && phase.Load() == 1 {
					if tickets.Add(-1) < 0 {
						return
					}
					ticket = true
				}
				t0 := time.Now()
				for {
					err := l.Lock(stop)
					if err == nil {
						break
					}
					if stop.Err() != nil {
						// Censored: still waiting at the end.
						if phase.Load() != 0 {
							now := time.Now()
							maxInt64(&maxWait, int64(now.Sub(t0)))
							if len(owners) > 1 {
								maxInt64(&longestGap, now.UnixNano()-lastAcq.Load())
							}
						}
						return
					}
					// A library that gives up (redsync after its tries)
					// is asked again; the wait goes on from t0.
					errs.Add(1)
					time.Sleep(time.Millisecond)
				}
				now := time.Now()
				if inside.Add(1) > 1 {
					violations.Add(1)
				}
				acquired.Add(1)
				counted := phase.Load() == 1
				if counted && cfg.Ops > 0 && !ticket {
					counted = tickets.Add(-1) >= 0
				}
				if counted {
					w := now.Sub(t0)
					waits[i] = append(waits[i], w)
					maxInt64(&maxWait, int64(w))
					prev := lastAcq.Swap(now.UnixNano())
					maxInt64(&longestGap, now.UnixNano()-prev)
					pendMu.Lock()
					if n := len(pending); n > 0 {
						last := pending[n-1]
						next[i] = append(next[i], now.Sub(last.at))
						if last.by == i {
							self[i]++
						} else {
							for _, p := range pending {
								handoffs[i] = append(handoffs[i], now.Sub(p.at))
							}
							pending = pending[:0]
						}
					}
					pendMu.Unlock()
				}
				if spec.hold > 0 {
					time.Sleep(spec.hold)
				}
				if counted {
					held.Add(int64(time.Since(now)))
				}
				inside.Add(-1)
				if counted {
					pendMu.Lock()
					pending = append(pending, release{at: time.Now(), by: i})
					pendMu.Unlock()
				}
				uctx, ucancel := context.WithTimeout(ctx, cfg.WaitTimeout)
				t1 := time.Now()
				err := l.Unlock(uctx)
				if counted {
					releases[i] = append(releases[i], time.Since(t1))
				}
				ucancel()
				if err != nil {
					errs.Add(1)
					unlockErr.Store(err.Error())
				}
				if counted {
					st.Counts[i]++
				}
			}
		}(i)
	}

	// The window: after the warm-up, for the duration or until the
	// tickets run out.
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	var warmupEnd time.Time
	if spec.warmup > 0 {
		t0 := time.Now()
		for acquired.Load() < spec.warmup && time.Since(t0) < warmupMax && stop.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		warmupEnd = time.Now()
		res.Notes = append(res.Notes, fmt.Sprintf("warm-up %d acquisitions in %v", acquired.Load(), warmupEnd.Sub(t0).Round(time.Millisecond)))
		open()
	}
	if spec.mid != nil && cfg.Ops == 0 {
		select {
		case <-time.After(stopAfter / 2):
			spec.mid(ctx, name)
		case <-finished:
		}
	}
	select {
	case <-time.After(time.Until(start.Add(stopAfter))):
	case <-finished:
	}
	end := time.Now()
	// The figures stop here: owners still waiting leave the lock's queue
	// when cancelled, which is no cost of an acquisition.
	var c1 Count
	var s1 int64
	if cfg.Ops == 0 {
		phase.Store(2)
		readCost(&cost1)
		c1 = cnt.Snapshot()
		var ok bool
		s1, ok = cfg.Server.PubSubCalls(ctx)
		subOK = subOK && ok
	}
	var srvTime *ServerTime
	if win != nil {
		srvTime = win.close(ctx, 0)
	}
	cancel()
	if !waitTimeout(&wg, cfg.WaitTimeout+5*time.Second) {
		res.Stalled = true
		res.Err = fmt.Sprintf("%v: owners had not returned %v after the end of the measurement", errStalled, cfg.WaitTimeout+5*time.Second)
		return
	}
	if cfg.Ops > 0 {
		end = time.Now()
	}
	res.Seconds = end.Sub(start).Seconds()
	var all, hand, nextHand, rel []time.Duration
	var selfN int64
	for i := range waits {
		all = append(all, waits[i]...)
		hand = append(hand, handoffs[i]...)
		nextHand = append(nextHand, next[i]...)
		selfN += self[i]
		rel = append(rel, releases[i]...)
		res.Ops += st.Counts[i]
	}
	if res.Ops == 0 {
		res.Err = "no acquisition completed"
		return
	}
	// With an operation budget, the owners that got no ticket still take
	// the lock once as the others leave: their acquisitions count for
	// commands per acquisition, which are counted until everybody left.
	perOp := res.Ops
	if cfg.Ops > 0 {
		readCost(&cost1)
		c1 = cnt.Snapshot()
		var ok bool
		s1, ok = cfg.Server.PubSubCalls(ctx)
		subOK = subOK && ok
		perOp = max(res.Ops, acquired.Load()-acqOpen)
	}
	d := c1.Sub(c0)
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CmdsPerOp = float64(d.Commands) / float64(perOp)
	res.TripsPerOp = float64(d.RoundTrips) / float64(perOp)
	if subOK {
		v := float64(s1-s0) / float64(perOp)
		res.SubsPerOp = &v
	}
	if srvTime != nil {
		st.Server = serverTime(cmdStat{srvTime.Calls, srvTime.Usec}, res.Ops)
	}
	if spec.cost != nil {
		if costErr != nil {
			res.Notes = append(res.Notes, "cost: "+costErr.Error())
		} else {
			s := cost1.since(cost0, int(perOp))
			var idle costSample
			if spec.idle != nil {
				idle = spec.idle(s.span)
			}
			c := costPerOp([]costSample{s}, idle)
			st.Cost = &c
		}
	}
	res.Latency = Summarize(all)
	res.Errors = errs.Load()
	res.Violations = violations.Load()
	st.Jain = Jain(st.Counts)
	st.MeanHold = time.Duration(held.Load() / res.Ops)
	st.MaxWait = time.Duration(maxWait.Load())
	st.LongestGap = time.Duration(longestGap.Load())
	st.Wait = res.Latency
	st.Handoff = Summarize(hand)
	st.NextHolder = Summarize(nextHand)
	if len(nextHand) > 0 {
		st.SelfHandoffs = float64(selfN) / float64(len(nextHand))
	}
	st.NotHandedOver = len(pending)
	st.Release = Summarize(rel)
	if c > 1 && st.LongestGap >= cfg.StallAfter {
		res.Stalled = true
		res.Notes = append(res.Notes, fmt.Sprintf("no acquisition for %v while owners waited", st.LongestGap.Round(time.Millisecond)))
	}
	if e, ok := unlockErr.Load().(string); ok {
		res.Notes = append(res.Notes, "an unlock failed: "+e)
	}
	res.Contention = st
}

// release is a release call: when, and by which owner.
type release struct {
	at time.Time
	by int
}

// openConns opens n Conns of k counting into cnt.
func openConns(k Kind, srv *Server, cnt *Counter, n int) ([]Conn, error) {
	return openConnsWith(k, srv, cnt, n, OpenOptions{})
}

// openConnsWith opens n Conns of k counting into cnt, with options o.
func openConnsWith(k Kind, srv *Server, cnt *Counter, n int, o OpenOptions) ([]Conn, error) {
	conns := make([]Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := k.Open(srv, cnt, o)
		if err != nil {
			closeConns(conns)
			return nil, fmt.Errorf("open: %w", err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeConns(conns []Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// cycleOnce locks and unlocks l once.
func cycleOnce(ctx context.Context, l Locker) error {
	if err := l.Lock(ctx); err != nil {
		return fmt.Errorf("warm-up lock: %w", err)
	}
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("warm-up unlock: %w", err)
	}
	return nil
}

// waitTimeout waits for wg, at most d; it reports whether wg finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

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
	cnt := &Counter{}
	conns, err := openConns(k, cfg.Server, cnt, min(c, maxConns))
	if err != nil {
		res.Err = err.Error()
		return res
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
			return res
		}
	}

	st := &ContentionStats{Hold: cfg.Hold, Counts: make([]int64, c), Conns: len(conns)}
	var (
		inside     atomic.Int32
		violations atomic.Int64
		errs       atomic.Int64
		tickets    atomic.Int64
		lastAcq    atomic.Int64 // unix ns of the latest acquisition
		longestGap atomic.Int64
		maxWait    atomic.Int64
		held       atomic.Int64 // total time inside, ns
		unlockErr  atomic.Value
	)
	tickets.Store(int64(cfg.Ops))
	stopAfter := cfg.Duration
	if cfg.Ops > 0 {
		stopAfter = cfg.WaitTimeout + time.Duration(cfg.Ops)*time.Second
	}

	cfg.started()
	c0 := cnt.Snapshot()
	s0, subsOK := cfg.Server.PubSubCalls(ctx)
	stop, cancel := context.WithTimeout(ctx, stopAfter)
	defer cancel()
	start := time.Now()
	lastAcq.Store(start.UnixNano())
	waits := make([][]time.Duration, c)
	var wg sync.WaitGroup
	for i := range owners {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := owners[i]
			for stop.Err() == nil {
				if cfg.Ops > 0 && tickets.Add(-1) < 0 {
					return
				}
				t0 := time.Now()
				for {
					err := l.Lock(stop)
					if err == nil {
						break
					}
					if stop.Err() != nil {
						// Censored: still waiting at the end.
						now := time.Now()
						maxInt64(&maxWait, int64(now.Sub(t0)))
						if len(owners) > 1 {
							maxInt64(&longestGap, now.UnixNano()-lastAcq.Load())
						}
						return
					}
					// A library that gives up (redsync after its tries)
					// is asked again; the wait goes on from t0.
					errs.Add(1)
					time.Sleep(time.Millisecond)
				}
				now := time.Now()
				w := now.Sub(t0)
				waits[i] = append(waits[i], w)
				maxInt64(&maxWait, int64(w))
				prev := lastAcq.Swap(now.UnixNano())
				maxInt64(&longestGap, now.UnixNano()-prev)
				if inside.Add(1) > 1 {
					violations.Add(1)
				}
				if cfg.Hold > 0 {
					time.Sleep(cfg.Hold)
				}
				held.Add(int64(time.Since(now)))
				inside.Add(-1)
				uctx, ucancel := context.WithTimeout(ctx, cfg.WaitTimeout)
				err := l.Unlock(uctx)
				ucancel()
				if err != nil {
					errs.Add(1)
					unlockErr.Store(err.Error())
				}
				st.Counts[i]++
			}
		}(i)
	}
	if !waitTimeout(&wg, stopAfter+cfg.WaitTimeout+5*time.Second) {
		res.Stalled = true
		res.Err = fmt.Sprintf("%v: owners had not returned %v after the end of the measurement", errStalled, cfg.WaitTimeout+5*time.Second)
		return res
	}
	end := time.Now()
	res.Seconds = end.Sub(start).Seconds()
	var all []time.Duration
	for i := range waits {
		all = append(all, waits[i]...)
		res.Ops += st.Counts[i]
	}
	if res.Ops == 0 {
		res.Err = "no acquisition completed"
		return res
	}
	d := cnt.Snapshot().Sub(c0)
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CmdsPerOp = float64(d.Commands) / float64(res.Ops)
	res.TripsPerOp = float64(d.RoundTrips) / float64(res.Ops)
	if s1, ok := cfg.Server.PubSubCalls(ctx); ok && subsOK {
		v := float64(s1-s0) / float64(res.Ops)
		res.SubsPerOp = &v
	}
	res.Latency = Summarize(all)
	res.Errors = errs.Load()
	res.Violations = violations.Load()
	st.Jain = Jain(st.Counts)
	st.MeanHold = time.Duration(held.Load() / res.Ops)
	st.MaxWait = time.Duration(maxWait.Load())
	st.LongestGap = time.Duration(longestGap.Load())
	if c > 1 && st.LongestGap >= cfg.StallAfter {
		res.Stalled = true
		res.Notes = append(res.Notes, fmt.Sprintf("no acquisition for %v while owners waited", st.LongestGap.Round(time.Millisecond)))
	}
	if e, ok := unlockErr.Load().(string); ok {
		res.Notes = append(res.Notes, "an unlock failed: "+e)
	}
	res.Contention = st
	return res
}

// openConns opens n Conns of k counting into cnt.
func openConns(k Kind, srv *Server, cnt *Counter, n int) ([]Conn, error) {
	conns := make([]Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := k.Open(srv, cnt, OpenOptions{})
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

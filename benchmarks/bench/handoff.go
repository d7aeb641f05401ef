package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Handoff measures how fast a released lock reaches a blocked waiter: a
// holder takes the lock, a waiter (another process: its own Conn) blocks
// on it, the holder releases after a jittered hold, and the sample is the
// time from the holder's Unlock call to the waiter's Lock returning.
// Commands per op count everything in one hand-off cycle (both owners'
// locks and unlocks, and every retry of a polling waiter).
//
// Interleaved with the lock's samples, under the same idle holds, it
// measures the floor of a pushed hand-off (PUBLISH, receive, SET NX on
// plain clients), the same with an owner-checked release (a
// compare-and-delete script that publishes), and a PING after the same
// idle time: the round trip that a hand-off is made of on this machine.
// It takes at least handoffMinSamples samples, unless that takes ten
// times cfg.Duration.
func Handoff(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioHandoff}
	cnt := &Counter{}
	holderConn, err := k.Open(cfg.Server, cnt, OpenOptions{})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer holderConn.Close()
	waiterConn, err := k.Open(cfg.Server, cnt, OpenOptions{})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer waiterConn.Close()

	name := UniqueName("handoff")
	holder, waiter := holderConn.New(name), waiterConn.New(name)
	st := &HandoffStats{RTT: cfg.RTT, HoldMin: cfg.HandoffHold / 2, HoldMax: cfg.HandoffHold * 3 / 2}
	var floor *pushFloor
	if k.Cluster != nil {
		floor, err = newClusterPushFloor(ctx, k.Cluster, name)
	} else {
		floor, err = newPushFloor(ctx, cfg.Server, name)
	}
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer floor.Close()
	if k.Cluster != nil {
		// The run's RTT is the single server's: measure the master's.
		if st.RTT, err = floor.hotRTT(ctx, 200); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	jitter := func() time.Duration {
		return st.HoldMin + time.Duration(rand.Int64N(int64(st.HoldMax-st.HoldMin)+1))
	}

	type got struct {
		at  time.Time
		err error
	}
	// one runs a hand-off; it returns the latency and the release time,
	// or ok=false when the waiter did not get the lock.
	one := func() (lat, rel time.Duration, ok bool, err error) {
		if err := holder.Lock(ctx); err != nil {
			return 0, 0, false, fmt.Errorf("holder lock: %w", err)
		}
		ch := make(chan got, 1)
		wctx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
		defer cancel()
		go func() {
			err := waiter.Lock(wctx)
			ch <- got{time.Now(), err}
		}()
		time.Sleep(jitter())
		t0 := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			return 0, 0, false, fmt.Errorf("holder unlock: %w", err)
		}
		rel = time.Since(t0)
		var g got
		select {
		case g = <-ch:
		case <-time.After(cfg.WaitTimeout + 5*time.Second):
			return 0, 0, false, fmt.Errorf("%w: the waiter's Lock did not return 5s after its context ended", errStalled)
		}
		if g.err != nil {
			if wctx.Err() != nil {
				st.Timeouts++
				return 0, rel, false, nil
			}
			return 0, 0, false, fmt.Errorf("waiter lock: %w", g.err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			return 0, 0, false, fmt.Errorf("waiter unlock: %w", err)
		}
		return g.at.Sub(t0), rel, true, nil
	}

	// Warm up: scripts, pools, subscriptions (the script floor's script
	// loaded: its first run would fall back to EVAL).
	for i := 0; i < 3; i++ {
		if _, _, _, err := one(); err != nil {
			res.Err = err.Error()
			res.Stalled = errors.Is(err, errStalled)
			return res
		}
	}
	if _, err := floor.scriptHandoff(ctx, st.HoldMin); err != nil {
		res.Err = err.Error()
		return res
	}
	st.Timeouts = 0

	cfg.started()
	c0 := cnt.Snapshot()
	s0, subsOK := cfg.Server.PubSubCalls(ctx)
	subsOK = subsOK && k.Cluster == nil // the server counted is not the cluster
	b := cfg.budget()
	start := time.Now()
	var lats, rels, floors, scriptFloors, pings []time.Duration
	for b.next() || (cfg.Ops == 0 && len(lats) < handoffMinSamples && time.Since(start) < 10*cfg.Duration) {
		lat, rel, ok, err := one()
		if err != nil {
			res.Err = err.Error()
			res.Stalled = errors.Is(err, errStalled)
			break
		}
		res.Ops++
		rels = append(rels, rel)
		if ok {
			lats = append(lats, lat)
		}
		fl, err := floor.handoff(ctx, jitter())
		if err != nil {
			res.Err = err.Error()
			break
		}
		floors = append(floors, fl)
		sf, err := floor.scriptHandoff(ctx, jitter())
		if err != nil {
			res.Err = err.Error()
			break
		}
		scriptFloors = append(scriptFloors, sf)
		p, err := floor.ping(ctx, jitter())
		if err != nil {
			res.Err = err.Error()
			break
		}
		pings = append(pings, p)
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Ops == 0 {
		if res.Err == "" {
			res.Err = "no hand-off completed"
		}
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
	res.Latency = Summarize(lats)
	st.Release = Summarize(rels)
	st.Floor = Summarize(floors)
	st.IdleRTT = Summarize(pings).P50
	if st.RTT > 0 {
		st.P50RTTs = float64(res.Latency.P50) / float64(st.RTT)
	}
	if st.IdleRTT > 0 {
		st.P50IdleRTTs = float64(res.Latency.P50) / float64(st.IdleRTT)
	}
	if st.Floor.P50 > 0 {
		st.RatioP50 = float64(res.Latency.P50) / float64(st.Floor.P50)
	}
	st.ScriptFloor = Summarize(scriptFloors)
	if st.ScriptFloor.P50 > 0 {
		st.ScriptRatioP50 = float64(res.Latency.P50) / float64(st.ScriptFloor.P50)
	}
	if st.Timeouts > 0 {
		res.Stalled = true
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d waiters not woken within %v (lost wake-up)", st.Timeouts, res.Ops, cfg.WaitTimeout))
	}
	res.Handoff = st
	return res
}

// handoffMinSamples is the fewest hand-offs measured (time permitting), so
// that a slow lock (a poll every 50-250ms) still gives a median.
const handoffMinSamples = 20

// errStalled marks a lock call that did not return long after it should
// have (its context ended, or the lock it asked for was free).
var errStalled = errors.New("stalled")

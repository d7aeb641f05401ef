package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The server-cost scenario's shape.
const (
	// serverCostBlocks is how many blocks of each cycle (the kind's and
	// the floors') are measured, interleaved; the figures are the medians
	// over the blocks, which a burst of load on a shared machine moves
	// less than a mean.
	serverCostBlocks = 7
	// serverCostCycles is how many cycles one block runs.
	serverCostCycles = 200
	// serverCostSettle is how long a block of the kind's cycles waits,
	// after the last one, before its closing reading: work that the
	// client does in the background after a cycle (deleting the request
	// records of confirmed releases, within 100-200 ms) is the cycle's.
	serverCostSettle = 300 * time.Millisecond
	// serverCostOwners and serverCostHold make the contended cycle:
	// that many owners, each on a Conn of its own, lock one name in a
	// loop and hold it that long.
	serverCostOwners = 3
	serverCostHold   = time.Millisecond
)

// ServerCostStats are the server-cost scenario's figures: per
// uncontended Lock+Unlock cycle on one handle, what the Redis server spent
// (CPU, time inside scripts, commands) and what this process spent (CPU),
// beside the two floors on the same go-redis client, measured in
// interleaved blocks; then the same per acquisition with owners
// contending.
type ServerCostStats struct {
	Blocks         int           `json:"blocks"`
	CyclesPerBlock int           `json:"cycles_per_block"`
	Settle         time.Duration `json:"settle_ns"`
	// Lock is the kind's cycle (its read side when the result's Read is
	// set), Floor SET NX PX + DEL, ScriptFloor SET NX PX + a one-line
	// compare-and-delete script run with EVALSHA: the least a safe lock
	// costs on a server without a native compare-and-delete.
	Lock        Cost `json:"lock"`
	Floor       Cost `json:"floor"`
	ScriptFloor Cost `json:"script_floor"`
	// Contended is the contended cycle; nil for a read side (readers
	// share) or when it could not be measured.
	Contended *ContendedCost `json:"contended,omitempty"`
}

// ContendedCost is the cost per acquisition of Owners owners (each on a
// Conn of its own) locking one name in a loop, each holding it for Hold.
type ContendedCost struct {
	Owners       int           `json:"owners"`
	Hold         time.Duration `json:"hold_ns"`
	Acquisitions int64         `json:"acquisitions"`
	// Cost is per acquisition; its Cycle is the window over the
	// acquisitions.
	Cost        Cost    `json:"cost"`
	TripsPerAcq float64 `json:"round_trips_per_acquisition"`
	Jain        float64 `json:"jain"`
	Wait        Dist    `json:"wait"`
}

// ServerCost measures what one uncontended Lock+Unlock cycle of k on one
// handle (RLock+RUnlock when read is set) costs the Redis server and this
// process: the server's CPU (INFO cpu), the time inside scripts and
// functions and the commands it ran (INFO commandstats), this process's
// CPU (getrusage), and the commands the client sent. Blocks of the kind's
// cycles alternate with blocks of SET NX PX + DEL and of SET NX PX + a
// compare-and-delete script on the same client, and with blocks of no
// cycle that measure what the readings themselves cost; each figure is
// the median over the blocks. Then, for the exclusive side, the same per
// acquisition with serverCostOwners owners contending.
//
// It needs a real server, which only the benchmark uses meanwhile;
// miniredis runs in this process and has no INFO cpu.
func ServerCost(ctx context.Context, cfg Config, k Kind, read bool) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioServerCost, Read: read}
	if !cfg.Server.Real() {
		res.Skipped = "needs a real Redis server (-redis URL): miniredis runs inside this process"
		return res
	}
	cnt := &Counter{}
	conn, err := k.Open(cfg.Server, cnt, OpenOptions{})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer conn.Close()
	floorCnt := cnt
	var raw redis.UniversalClient
	if rc, ok := conn.(RedisClienter); ok {
		raw = rc.Redis()
	} else {
		floorCnt = &Counter{}
		c := cfg.Server.NewRedis(floorCnt)
		defer c.Close()
		raw = c
	}
	probe := newCostProbe(cfg.Server)
	defer probe.Close()

	name := UniqueName("cost")
	l := conn.New(name)
	if read {
		rl, ok := l.(RLocker)
		if !ok {
			res.Err = "no read side"
			return res
		}
		l = rlockAsLock{rl}
	}
	var lat []time.Duration
	cycle := func() error {
		t := time.Now()
		if err := l.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		lat = append(lat, time.Since(t))
		return nil
	}
	floor, scriptFloor := floorCycles(ctx, raw, name)

	blocks, n := serverCostBlocks, serverCostCycles
	if cfg.Ops > 0 {
		blocks, n = 3, cfg.Ops
	}
	// Warm up: scripts and functions loaded, pools filled.
	for i := 0; i < 20; i++ {
		for _, f := range []func() error{cycle, floor, scriptFloor} {
			if err := f(); err != nil {
				res.Err = "warm-up: " + err.Error()
				return res
			}
		}
	}
	lat = lat[:0]

	cfg.started()
	start := time.Now()
	var lock, fl, sfl, idle0, idleS []costSample
	for b := 0; b < blocks; b++ {
		for _, m := range []struct {
			out    *[]costSample
			cnt    *Counter
			n      int
			settle time.Duration
			f      func() error
		}{
			{&lock, cnt, n, serverCostSettle, cycle},
			{&fl, floorCnt, n, 0, floor},
			{&sfl, floorCnt, n, 0, scriptFloor},
			{&idle0, cnt, 0, 0, nil},
			{&idleS, cnt, 0, serverCostSettle, nil},
		} {
			s, err := probe.block(ctx, m.cnt, m.n, m.settle, m.f)
			if err != nil {
				res.Err = err.Error()
				return res
			}
			*m.out = append(*m.out, s)
		}
	}
	i0, iS := medianSample(idle0), medianSample(idleS)
	st := &ServerCostStats{
		Blocks: blocks, CyclesPerBlock: n, Settle: serverCostSettle,
		Lock:        costPerOp(lock, iS),
		Floor:       costPerOp(fl, i0),
		ScriptFloor: costPerOp(sfl, i0),
	}
	res.Seconds = time.Since(start).Seconds()
	res.Ops = int64(len(lat))
	res.Latency = Summarize(lat)
	if res.Latency.Mean > 0 {
		res.OpsPerSec = float64(time.Second) / float64(res.Latency.Mean)
	}
	res.CmdsPerOp = st.Lock.Commands
	var trips int64
	for _, s := range lock {
		trips += s.sent.RoundTrips
	}
	res.TripsPerOp = float64(trips) / float64(blocks*n)
	res.ServerCost = st

	if !read {
		st.Contended = contendedCost(ctx, cfg, k, &res, probe, func(d time.Duration) costSample {
			return idleFor(i0, iS, serverCostSettle, d)
		})
	}
	return res
}

// contendedCost measures the cost per acquisition of serverCostOwners
// owners of k contending for one name, adding their violations and
// errors to res.
func contendedCost(ctx context.Context, cfg Config, k Kind, res *Result, probe *costProbe, idle func(time.Duration) costSample) *ContendedCost {
	sub := Result{Kind: k.Name, Scenario: ScenarioServerCost, Contenders: serverCostOwners}
	contend(ctx, cfg, k, &sub, contendSpec{
		owners: serverCostOwners, hold: serverCostHold, warmup: 2 * serverCostOwners,
		cost: probe, idle: idle,
	})
	res.Violations += sub.Violations
	res.Errors += sub.Errors
	if sub.Stalled {
		res.Stalled = true
	}
	switch {
	case sub.Err != "":
		res.Notes = append(res.Notes, "contended: "+sub.Err)
		return nil
	case sub.Contention == nil || sub.Contention.Cost == nil:
		res.Notes = append(res.Notes, "contended: no figures")
		return nil
	}
	c := sub.Contention
	return &ContendedCost{
		Owners: serverCostOwners, Hold: serverCostHold, Acquisitions: sub.Ops,
		Cost: *c.Cost, TripsPerAcq: sub.TripsPerOp, Jain: c.Jain, Wait: c.Wait,
	}
}

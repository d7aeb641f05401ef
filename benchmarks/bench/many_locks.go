package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// manyLocksPhases is how many times the many-locks scenario switches
// between the lock and the floor (each runs half of them, alternating),
// so that both see the same machine.
const manyLocksPhases = 4

// ManyLocks measures many independent locks: cfg.LockWorkers goroutines
// of one process (one Conn) each lock and unlock names drawn at random
// out of cfg.LockNames, with a new handle per cycle (as an application
// locking "order:<id>" makes one) and no critical section. Two workers
// rarely draw the same name, so each lock is all but uncontended. It
// reports cycles per second beside the raw floor of the same workers
// doing SET NX PX + DEL on the same go-redis client (or a plain one when
// the kind has its own client), alternating in phases. Latency is one
// cycle (New, Lock, Unlock).
func ManyLocks(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioManyLocks, Contenders: cfg.LockWorkers}
	cnt := &Counter{}
	conn, err := k.Open(cfg.Server, cnt, OpenOptions{})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer conn.Close()
	st := &ManyLocksStats{Workers: cfg.LockWorkers, Names: cfg.LockNames}
	var raw redis.UniversalClient
	if rc, ok := conn.(RedisClienter); ok {
		raw, st.SameClient = rc.Redis(), true
	} else {
		c := cfg.Server.NewRedis(nil)
		defer c.Close()
		raw = c
	}

	prefix := UniqueName("many") + "."
	names := make([]string, cfg.LockNames)
	floorKeys := make([]string, cfg.LockNames)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
		floorKeys[i] = "relockbench:floor:{" + names[i] + "}"
	}
	defer func() {
		// What the cycles left (request records) would weigh on later
		// measurements of server memory.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = deleteKeys(cctx, raw, "*"+prefix+"*")
	}()

	cycle := func(ctx context.Context, i int) (bool, error) {
		l := conn.New(names[i])
		if err := l.Lock(ctx); err != nil {
			return false, fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return false, fmt.Errorf("unlock: %w", err)
		}
		return true, nil
	}
	floor := func(ctx context.Context, i int) (bool, error) {
		ok, err := raw.SetNX(ctx, floorKeys[i], "w", 30*time.Second).Result()
		if err != nil || !ok {
			return false, err
		}
		return true, raw.Del(ctx, floorKeys[i]).Err()
	}
	// Warm up both: scripts, pools (every worker at once).
	for _, f := range []func(context.Context, int) (bool, error){cycle, floor} {
		ph := manyLocksPhase(ctx, cfg, f, cfg.LockWorkers*4, 0, len(names))
		if ph.err != nil {
			res.Err = "warm-up: " + ph.err.Error()
			res.Stalled = ph.stalled
			return res
		}
	}

	cfg.started()
	var lock, fl phaseResult
	var lockCount Count
	per := cfg.Duration / manyLocksPhases
	ops := 0
	if cfg.Ops > 0 {
		ops = max(1, cfg.Ops/(manyLocksPhases/2))
	}
	for p := 0; p < manyLocksPhases; p++ {
		m := cfg.Server.startCPU(ctx)
		if p%2 == 0 {
			c0 := cnt.Snapshot()
			ph := manyLocksPhase(ctx, cfg, cycle, ops, per, len(names))
			d := cnt.Snapshot().Sub(c0)
			lockCount.Commands += d.Commands
			lockCount.RoundTrips += d.RoundTrips
			ph.client, ph.server = m.stop(ctx)
			lock.add(ph)
		} else {
			ph := manyLocksPhase(ctx, cfg, floor, ops, per, len(names))
			ph.client, ph.server = m.stop(ctx)
			fl.add(ph)
		}
		if lock.err != nil || fl.err != nil {
			break
		}
	}
	switch {
	case lock.err != nil:
		res.Err, res.Stalled = lock.err.Error(), lock.stalled
	case fl.err != nil:
		res.Err = "floor: " + fl.err.Error()
	}
	res.Ops = int64(len(lock.lat))
	res.Seconds = (lock.time + fl.time).Seconds()
	if res.Ops == 0 || res.Err != "" {
		if res.Err == "" {
			res.Err = "no cycle completed"
		}
		return res
	}
	res.OpsPerSec = float64(res.Ops) / lock.time.Seconds()
	res.Latency = Summarize(lock.lat)
	res.CmdsPerOp = float64(lockCount.Commands) / float64(res.Ops)
	res.TripsPerOp = float64(lockCount.RoundTrips) / float64(res.Ops)
	st.Floor = Summarize(fl.lat)
	st.FloorPerSec = float64(len(fl.lat)) / fl.time.Seconds()
	st.Collisions = fl.skipped
	if cfg.Server.Real() {
		st.ClientCPU = perCycle(lock.client, len(lock.lat))
		st.ServerCPU = perCycle(lock.server, len(lock.lat))
		st.FloorClientCPU = perCycle(fl.client, len(fl.lat))
		st.FloorServerCPU = perCycle(fl.server, len(fl.lat))
	}
	if st.FloorPerSec > 0 {
		st.Ratio = res.OpsPerSec / st.FloorPerSec
	}
	res.ManyLocks = st
	return res
}

// perCycle is d over n cycles.
func perCycle(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

// phaseResult is what the workers of one or more phases did, and the CPU
// time this process and the server used meanwhile.
type phaseResult struct {
	lat            []time.Duration
	skipped        int64
	time           time.Duration
	client, server time.Duration
	err            error
	stalled        bool
}

func (p *phaseResult) add(o phaseResult) {
	p.lat = append(p.lat, o.lat...)
	p.skipped += o.skipped
	p.time += o.time
	p.client += o.client
	p.server += o.server
	if p.err == nil {
		p.err, p.stalled = o.err, o.stalled
	}
}

// manyLocksPhase runs cfg.LockWorkers workers calling f on random names
// for d, or until ops calls when ops > 0. f reports whether it did a whole
// cycle (false: skipped, the name was taken).
func manyLocksPhase(ctx context.Context, cfg Config, f func(context.Context, int) (bool, error), ops int, d time.Duration, names int) phaseResult {
	var (
		wg      sync.WaitGroup
		left    atomic.Int64
		skipped atomic.Int64
		mu      sync.Mutex
		failed  error
	)
	left.Store(int64(ops))
	lats := make([][]time.Duration, cfg.LockWorkers)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < cfg.LockWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for pctx.Err() == nil {
				if ops > 0 {
					if left.Add(-1) < 0 {
						return
					}
				} else if !time.Now().Before(end) {
					return
				}
				t := time.Now()
				ok, err := f(pctx, rand.IntN(names))
				if err != nil {
					mu.Lock()
					if failed == nil && pctx.Err() == nil {
						failed = err
						cancel()
					}
					mu.Unlock()
					return
				}
				if !ok {
					skipped.Add(1)
					continue
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		}(w)
	}
	var out phaseResult
	limit := d + cfg.WaitTimeout + 5*time.Second
	if ops > 0 {
		limit = cfg.WaitTimeout + time.Duration(ops)*time.Second
	}
	if !waitTimeout(&wg, limit) {
		cancel()
		out.err = fmt.Errorf("%w: workers had not returned %v after the phase began", errStalled, limit)
		out.stalled = true
		return out
	}
	out.time = time.Since(start)
	for _, l := range lats {
		out.lat = append(out.lat, l...)
	}
	out.skipped = skipped.Load()
	mu.Lock()
	out.err = failed
	mu.Unlock()
	return out
}

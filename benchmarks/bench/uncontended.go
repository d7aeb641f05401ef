package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// compareAndDelete is the smallest safe release on Redis 7.0 (which has no
// native compare-and-delete): the script floor of any correct lock.
var compareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// uncontendedBlock is how many cycles run back to back before switching
// between the lock and the floor, so that both see the same machine load.
const uncontendedBlock = 50

// Uncontended measures Lock+Unlock cycles of one owner on a free lock:
// cycle time and commands per cycle, beside the raw floor of the same
// client doing SET NX PX + DEL and the script floor SET NX PX + a one-line
// compare-and-delete script, all interleaved in the same run.
func Uncontended(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioUncontended}
	cnt := &Counter{}
	conn, err := k.Open(cfg.Server, cnt, OpenOptions{})
	if err != nil {
		res.Err = fmt.Sprintf("open: %v", err)
		return res
	}
	defer conn.Close()

	st := &UncontendedStats{}
	floorCnt := cnt
	var raw redis.UniversalClient
	if rc, ok := conn.(RedisClienter); ok {
		raw, st.SameClient = rc.Redis(), true
	} else {
		floorCnt = &Counter{}
		c := cfg.Server.NewRedis(floorCnt)
		defer c.Close()
		raw = c
	}

	name := UniqueName("uncontended")
	l := conn.New(name)
	cycle := func() error {
		if err := l.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}
	floor, scriptFloor := floorCycles(ctx, raw, name)

	// Warm up: load scripts, fill connection pools.
	for i := 0; i < 20; i++ {
		for _, f := range []func() error{cycle, floor, scriptFloor} {
			if err := f(); err != nil {
				res.Err = err.Error()
				return res
			}
		}
	}

	var lockLat, floorLat, scriptLat []time.Duration
	var lockCount, floorCount, scriptCount Count
	block := func(f func() error, lat *[]time.Duration, c *Counter, total *Count, n int) error {
		c0 := c.Snapshot()
		for i := 0; i < n; i++ {
			t := time.Now()
			if err := f(); err != nil {
				return err
			}
			*lat = append(*lat, time.Since(t))
		}
		d := c.Snapshot().Sub(c0)
		total.Commands += d.Commands
		total.RoundTrips += d.RoundTrips
		total.Sweeps += d.Sweeps
		return nil
	}

	cfg.started()
	b := cfg.budget()
	start := time.Now()
	var lockTime time.Duration
	for {
		n := 0
		for n < uncontendedBlock && b.next() {
			n++
		}
		if n == 0 {
			break
		}
		t := time.Now()
		if err := block(cycle, &lockLat, cnt, &lockCount, n); err != nil {
			res.Err = err.Error()
			return res
		}
		lockTime += time.Since(t)
		if err := block(floor, &floorLat, floorCnt, &floorCount, n); err != nil {
			res.Err = err.Error()
			return res
		}
		if err := block(scriptFloor, &scriptLat, floorCnt, &scriptCount, n); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Ops = int64(len(lockLat))
	if res.Ops == 0 {
		res.Err = "no cycle completed"
		return res
	}
	res.OpsPerSec = float64(res.Ops) / lockTime.Seconds()
	res.Latency = Summarize(lockLat)
	res.CmdsPerOp = float64(lockCount.Commands) / float64(res.Ops)
	res.TripsPerOp = float64(lockCount.RoundTrips) / float64(res.Ops)
	st.SweepsPerOp = float64(lockCount.Sweeps) / float64(res.Ops)
	st.Floor = Summarize(floorLat)
	st.FloorCmdsPerOp = float64(floorCount.Commands) / float64(len(floorLat))
	st.RatioP50 = float64(res.Latency.P50) / float64(st.Floor.P50)
	st.RatioMean = float64(res.Latency.Mean) / float64(st.Floor.Mean)
	st.ScriptFloor = Summarize(scriptLat)
	st.ScriptRatioP50 = float64(res.Latency.P50) / float64(st.ScriptFloor.P50)
	st.ScriptRateRatio = float64(st.ScriptFloor.Mean) / float64(res.Latency.Mean)
	res.Uncontended = st
	return res
}

// floorCycles returns the two floors of a lock cycle on raw, on keys of
// their own beside the lock called name: SET NX PX + DEL, and SET NX PX +
// the compare-and-delete script.
func floorCycles(ctx context.Context, raw redis.UniversalClient, name string) (floor, scriptFloor func() error) {
	floorKey := "relockbench:floor:{" + name + "}"
	floorToken := UniqueName("token")
	floor = func() error {
		ok, err := raw.SetNX(ctx, floorKey, floorToken, 30*time.Second).Result()
		if err != nil {
			return fmt.Errorf("floor SET NX: %w", err)
		}
		if !ok {
			return fmt.Errorf("floor SET NX: key %q exists", floorKey)
		}
		if err := raw.Del(ctx, floorKey).Err(); err != nil {
			return fmt.Errorf("floor DEL: %w", err)
		}
		return nil
	}
	cadKey := "relockbench:cad:{" + name + "}"
	scriptFloor = func() error {
		if err := raw.SetNX(ctx, cadKey, floorToken, 30*time.Second).Err(); err != nil {
			return fmt.Errorf("script floor SET NX: %w", err)
		}
		if err := compareAndDelete.Run(ctx, raw, []string{cadKey}, floorToken).Err(); err != nil {
			return fmt.Errorf("script floor release: %w", err)
		}
		return nil
	}
	return floor, scriptFloor
}

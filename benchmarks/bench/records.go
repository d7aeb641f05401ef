package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The request-record measurement's shape.
const (
	// recordWait is how long after the cycles the keys they left are
	// counted again: a release's request record that the library deletes
	// once the release is confirmed is gone by then.
	recordWait = 500 * time.Millisecond
	// recordWindow is how long owners cycle at a steady rate before the
	// keys they left are measured (while they go on cycling).
	recordWindow = 2 * time.Second
	// recordWorkers is how many goroutines cycle in the steady phase.
	recordWorkers = 32
)

// RecordStats are the keys that lock cycles of new handles leave behind
// for a while (relock's request records, which answer a release that
// go-redis sends again after a lost reply), as measured.
type RecordStats struct {
	// Cycles cycles of a new handle each (one Conn, distinct names) left
	// LeftAfter keys right after the last one returned, LeftAfterWait
	// keys Wait later, and LeftAfterClose once the Conn was closed. TTL
	// is the longest remaining TTL of the keys right after, BytesPerKey
	// their mean MEMORY USAGE.
	Cycles         int           `json:"cycles"`
	LeftAfter      int64         `json:"left_after_cycles"`
	Wait           time.Duration `json:"wait_ns"`
	LeftAfterWait  int64         `json:"left_after_wait"`
	LeftAfterClose int64         `json:"left_after_close"`
	TTL            time.Duration `json:"ttl_ns"`
	BytesPerKey    float64       `json:"bytes_per_key"`
	// While recordWorkers goroutines cycled new handles at Rate cycles/s
	// (at most TargetRate) for Window: the keys other than held locks
	// seen at the end, their MEMORY USAGE (Bytes) and the growth of the
	// server's allocated memory less its clients' (Alloc); zero when the
	// cycles left no key at all.
	Window time.Duration `json:"window_ns"`
	Rate   float64       `json:"cycles_per_sec"`
	Keys   int64         `json:"keys"`
	Bytes  int64         `json:"bytes"`
	Alloc  int64         `json:"alloc"`
	// TargetRate is the rate the target speaks of; AtRate is Bytes
	// scaled to it (linear in the rate).
	TargetRate float64 `json:"target_rate"`
	AtRate     float64 `json:"bytes_at_target_rate"`
	// Steady is what the records hold at steady state at TargetRate:
	// AtRate when the keys were gone after Wait (the window saw their
	// steady state; SteadyMeasured), else computed as keys per cycle x
	// BytesPerKey x TargetRate x TTL (they outlive the window).
	Steady         float64 `json:"steady_state_bytes"`
	SteadyMeasured bool    `json:"steady_state_measured"`
}

// measureRecords measures the keys that cycles of new handles of k leave
// behind (see RecordStats); rdb is a plain client on the server.
func measureRecords(ctx context.Context, cfg Config, k Kind, rdb *redis.Client) (*RecordStats, error) {
	st := &RecordStats{Cycles: cfg.MemoryLocks, Wait: recordWait, TargetRate: cfg.RecordRate}
	prefix := UniqueName("records") + "."
	pattern := "*" + prefix + "*"
	defer func() { _ = deleteKeys(context.WithoutCancel(ctx), rdb, pattern) }()
	conn, err := k.Open(cfg.Server, &Counter{}, OpenOptions{})
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = conn.Close()
		}
	}()
	names := make([]Locker, st.Cycles)
	for i := range names {
		names[i] = conn.New(prefix + strconv.Itoa(i))
	}
	if err := forAll(names, func(l Locker) error { return cycleOnce(ctx, l) }); err != nil {
		return nil, err
	}
	left, err := measureKeys(ctx, rdb, pattern, prefix)
	if err != nil {
		return nil, err
	}
	st.LeftAfter = int64(len(left))
	var sum int64
	for _, key := range left {
		sum += key.bytes
		st.TTL = max(st.TTL, key.ttl)
	}
	if len(left) > 0 {
		st.BytesPerKey = float64(sum) / float64(len(left))
	}
	time.Sleep(recordWait)
	if st.LeftAfterWait, err = countKeys(ctx, rdb, pattern); err != nil {
		return nil, err
	}
	closed = true
	if err := conn.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	if st.LeftAfterClose, err = countKeys(ctx, rdb, pattern); err != nil {
		return nil, err
	}
	if st.LeftAfter == 0 && st.LeftAfterWait == 0 {
		st.SteadyMeasured = true
		return st, nil
	}
	if err := recordsAtRate(ctx, cfg, k, rdb, st); err != nil {
		return nil, err
	}
	if st.LeftAfterWait == 0 {
		st.Steady, st.SteadyMeasured = st.AtRate, true
	} else {
		st.Steady = float64(st.LeftAfter) / float64(st.Cycles) * st.BytesPerKey * st.TargetRate * st.TTL.Seconds()
	}
	return st, nil
}

// recordsAtRate has recordWorkers goroutines cycle new handles of k on
// names drawn at random, at most st.TargetRate cycles per second in all,
// and measures the keys they leave while they cycle.
func recordsAtRate(ctx context.Context, cfg Config, k Kind, rdb *redis.Client, st *RecordStats) error {
	conn, err := k.Open(cfg.Server, &Counter{}, OpenOptions{})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer conn.Close()
	prefix := UniqueName("records.rate") + "."
	pattern := "*" + prefix + "*"
	defer func() { _ = deleteKeys(context.WithoutCancel(ctx), rdb, pattern) }()
	if err := cycleOnce(ctx, conn.New(prefix+"warm")); err != nil {
		return err
	}
	u0, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		done   atomic.Int64
		ticket atomic.Int64
		mu     sync.Mutex
		failed error
	)
	start := time.Now()
	interval := time.Duration(float64(time.Second) / st.TargetRate)
	for w := 0; w < recordWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				// Each cycle has its slot in time: at most TargetRate/s.
				if d := time.Until(start.Add(time.Duration(ticket.Add(1)-1) * interval)); d > 0 {
					time.Sleep(d)
				}
				l := conn.New(prefix + strconv.Itoa(rand.IntN(100000)))
				if err := cycleOnce(wctx, l); err != nil {
					if wctx.Err() == nil {
						mu.Lock()
						failed = errors.Join(failed, err)
						mu.Unlock()
						cancel()
					}
					return
				}
				done.Add(1)
			}
		}()
	}
	stop := func() {
		cancel()
		wg.Wait()
	}
	select {
	case <-time.After(recordWindow):
	case <-wctx.Done():
	}
	keys, err1 := measureKeys(ctx, rdb, pattern, prefix)
	u1, err2 := usedMemory(ctx, rdb)
	elapsed := time.Since(start)
	n := done.Load()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(failed, err1, err2); err != nil {
		return err
	}
	st.Window = recordWindow
	st.Rate = float64(n) / elapsed.Seconds()
	for _, key := range keys {
		if key.class != "lock" {
			st.Keys++
			st.Bytes += key.bytes
		}
	}
	st.Alloc = u1 - u0
	if st.Rate > 0 {
		st.AtRate = float64(st.Bytes) * st.TargetRate / st.Rate
	}
	return nil
}

// countKeys counts the keys matching pattern.
func countKeys(ctx context.Context, c redis.UniversalClient, pattern string) (int64, error) {
	keys, err := scanKeys(ctx, c, pattern)
	return int64(len(keys)), err
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Memory measures what a lock type keeps in Redis: the bytes per held
// lock (cfg.MemoryLocks locks on distinct names, one owner each), per
// queued waiter (cfg.MemoryWaiters waiters blocked on one held lock, for
// kinds whose waiters queue in Redis), and the keys a lock cycle leaves
// behind for a while (relock's request records), with what they hold at
// steady state at cfg.RecordRate cycles per second of distinct owners,
// computed as bytes per key x keys per cycle x rate x the TTL they were
// given; then, measured (RecordStats), the keys that cycles of new
// handles leave right after, a moment later and once their client is
// closed, and what they hold while owners cycle at a steady rate. Bytes are MEMORY USAGE (SAMPLES 0) summed over every key holding
// a name of the measurement, beside the growth of the server's allocated
// memory less its client buffers ("alloc": it also counts the keyspace's
// dictionaries, expiry entries and pub/sub subscriptions). It needs a
// real server; the keys it leaves are deleted at the end.
func Memory(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioMemory}
	if !cfg.Server.Real() {
		res.Skipped = "MEMORY USAGE needs a real Redis server"
		return res
	}
	rdb := cfg.Server.NewRedis(nil)
	defer rdb.Close()
	cnt := &Counter{}
	conns, err := openConns(k, cfg.Server, cnt, maxConns)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeConns(conns)
	if err := cycleOnce(ctx, conns[0].New(UniqueName("memory.warm"))); err != nil {
		res.Err = err.Error()
		return res
	}

	n := cfg.MemoryLocks
	st := &MemoryStats{Locks: n, RecordRate: cfg.RecordRate, ByClass: map[string]float64{}}
	prefix := UniqueName("memory") + "."
	pattern := "*" + prefix + "*"
	defer func() { _ = deleteKeys(context.WithoutCancel(ctx), rdb, pattern) }()
	owners := make([]Locker, n)
	for i := range owners {
		owners[i] = conns[0].New(prefix + strconv.Itoa(i))
	}
	cfg.started()
	start := time.Now()
	u0, err := usedMemory(ctx, rdb)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	lock := func(l Locker) error {
		lctx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
		defer cancel()
		return l.Lock(lctx)
	}
	if err := forAll(owners, lock); err != nil {
		res.Err = fmt.Sprintf("lock: %v", err)
		_ = forAll(owners, func(l Locker) error { _ = l.Unlock(ctx); return nil })
		return res
	}
	u1, err1 := usedMemory(ctx, rdb)
	held, err2 := measureKeys(ctx, rdb, pattern, prefix)
	if err := errors.Join(err1, err2); err != nil {
		res.Err = err.Error()
		return res
	}
	st.KeysPerLock = float64(len(held)) / float64(n)
	var sum int64
	for _, key := range held {
		sum += key.bytes
		st.ByClass[key.class] += float64(key.bytes) / float64(n)
	}
	st.BytesPerLock = float64(sum) / float64(n)
	st.AllocPerLock = float64(u1-u0) / float64(n)

	// Release every lock once: what is left is what a cycle leaves.
	if err := forAll(owners, func(l Locker) error { return l.Unlock(ctx) }); err != nil {
		res.Err = fmt.Sprintf("unlock: %v", err)
		return res
	}
	// The keys first, while their TTLs are what the cycles gave them.
	left, err1 := measureKeys(ctx, rdb, pattern, prefix)
	u2, err2 := usedMemory(ctx, rdb)
	if err := errors.Join(err1, err2); err != nil {
		res.Err = err.Error()
		return res
	}
	st.LeftPerCycle = float64(len(left)) / float64(n)
	if len(left) > 0 {
		var b int64
		for _, key := range left {
			b += key.bytes
			st.LeftTTL = max(st.LeftTTL, key.ttl)
		}
		st.BytesPerLeft = float64(b) / float64(len(left))
		st.AllocPerLeft = float64(u2-u0) / float64(len(left))
		st.SteadyRecords = st.BytesPerLeft * st.LeftPerCycle * st.RecordRate * st.LeftTTL.Seconds()
	}
	res.Ops = int64(n)

	if k.Queue {
		if err := memoryWaiters(ctx, cfg, conns, rdb, st); err != nil {
			res.Err = fmt.Sprintf("waiters: %v", err)
		}
	}
	if res.Err == "" {
		rec, err := measureRecords(ctx, cfg, k, rdb)
		if err != nil {
			res.Err = fmt.Sprintf("request records: %v", err)
		}
		st.Records = rec
	}
	res.Seconds = time.Since(start).Seconds()
	res.Memory = st
	return res
}

// memoryWaiters blocks cfg.MemoryWaiters waiters on a held lock and
// measures what the queue adds.
func memoryWaiters(ctx context.Context, cfg Config, conns []Conn, rdb *redis.Client, st *MemoryStats) error {
	w := cfg.MemoryWaiters
	name := UniqueName("memory.queue")
	pattern := "*" + name + "*"
	defer func() { _ = deleteKeys(context.WithoutCancel(ctx), rdb, pattern) }()
	holder := conns[0].New(name)
	if err := holder.Lock(ctx); err != nil {
		return err
	}
	defer func() { _ = holder.Unlock(context.WithoutCancel(ctx)) }()
	// One waiter first, so that each Conn's pub/sub connection and the
	// queue's keys exist before the baseline.
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wait := func(l Locker) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Lock(wctx) == nil {
				_ = l.Unlock(ctx)
			}
		}()
	}
	queued := func(want int64) (int64, error) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			q := queueLen(ctx, cfg.Server, name)
			if q >= want {
				return q, nil
			}
			if time.Now().After(deadline) {
				return q, fmt.Errorf("%d of %d waiters queued after 10s", q, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range conns {
		wait(conns[i].New(name))
	}
	if _, err := queued(int64(len(conns))); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	b0, err1 := keyBytesExact(ctx, rdb, pattern)
	u0, err2 := usedMemory(ctx, rdb)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	for i := len(conns); i < w; i++ {
		wait(conns[i%len(conns)].New(name))
	}
	q, err := queued(int64(w))
	if err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	b1, err1 := keyBytesExact(ctx, rdb, pattern)
	u1, err2 := usedMemory(ctx, rdb)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	added := float64(w - len(conns))
	st.Waiters = w
	st.Queued = q
	st.BytesPerWaiter = float64(b1-b0) / added
	st.AllocPerWaiter = float64(u1-u0) / added
	return nil
}

// keyInfo is one key of a memory measurement.
type keyInfo struct {
	class string
	bytes int64
	ttl   time.Duration
}

// measureKeys returns the keys matching pattern with their MEMORY USAGE,
// TTL and class: what follows the lock's name (prefix then digits) in the
// key, "lock" when nothing does, "record" for relock's ":r:<token>".
func measureKeys(ctx context.Context, c *redis.Client, pattern, prefix string) ([]keyInfo, error) {
	keys, err := scanKeys(ctx, c, pattern)
	if err != nil {
		return nil, err
	}
	out := make([]keyInfo, 0, len(keys))
	for i := 0; i < len(keys); i += 1000 {
		batch := keys[i:min(i+1000, len(keys))]
		p := c.Pipeline()
		mem := make([]*redis.IntCmd, len(batch))
		ttl := make([]*redis.DurationCmd, len(batch))
		for j, key := range batch {
			mem[j] = p.MemoryUsage(ctx, key, 0)
			ttl[j] = p.PTTL(ctx, key)
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("memory usage: %w", err)
		}
		for j, key := range batch {
			b, err := mem[j].Result()
			if err != nil {
				continue // expired meanwhile
			}
			out = append(out, keyInfo{class: keyClass(key, prefix), bytes: b, ttl: max(0, ttl[j].Val())})
		}
	}
	return out, nil
}

// keyClass names what a key is for, by what follows the lock's name in it.
func keyClass(key, prefix string) string {
	_, rest, ok := strings.Cut(key, prefix)
	if !ok {
		return "other"
	}
	rest = strings.TrimLeft(rest, "0123456789")
	rest = strings.TrimLeft(rest, "}:")
	switch {
	case rest == "":
		return "lock"
	case strings.HasPrefix(rest, "r:"):
		return "record"
	}
	f, _, _ := strings.Cut(rest, ":")
	return f
}

// keyBytesExact sums MEMORY USAGE over the keys matching pattern.
func keyBytesExact(ctx context.Context, c *redis.Client, pattern string) (int64, error) {
	keys, err := measureKeys(ctx, c, pattern, "")
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, k := range keys {
		sum += k.bytes
	}
	return sum, nil
}

// keyBytes sums MEMORY USAGE over the keys that hold name, on a real
// server; ok is false elsewhere.
func keyBytes(ctx context.Context, srv *Server, name string) (int64, bool) {
	if !srv.Real() {
		return 0, false
	}
	c := srv.NewRedis(nil)
	defer c.Close()
	b, err := keyBytesExact(ctx, c, "*"+name+"*")
	return b, err == nil
}

// allocSettle is how long usedMemory waits before asking: the server
// accounts its clients' memory in its clientsCron, a tenth of a second
// and a slice of the clients at a time, so a connection just opened is
// counted a little later.
const allocSettle = 1100 * time.Millisecond

// usedMemory returns the server's allocated memory less its clients'
// (MEMORY STATS: total.allocated - clients.normal - clients.slaves) after
// allocSettle: what keys, their dictionaries and expiry entries, and
// pub/sub subscriptions take, without the connections, their query and
// reply buffers, which come and go with the traffic.
func usedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	select {
	case <-time.After(allocSettle):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	v, err := c.Do(ctx, "MEMORY", "STATS").Result()
	if err != nil {
		return 0, fmt.Errorf("memory stats: %w", err)
	}
	fields := map[string]int64{}
	switch m := v.(type) {
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			name, _ := m[i].(string)
			if n, ok := m[i+1].(int64); ok {
				fields[name] = n
			}
		}
	case map[any]any:
		for k, val := range m {
			name, _ := k.(string)
			if n, ok := val.(int64); ok {
				fields[name] = n
			}
		}
	}
	total, ok := fields["total.allocated"]
	if !ok {
		return 0, errors.New("memory stats: no total.allocated")
	}
	return total - fields["clients.normal"] - fields["clients.slaves"], nil
}

// deleteKeys deletes the keys matching pattern (what a measurement left).
func deleteKeys(ctx context.Context, c redis.UniversalClient, pattern string) error {
	keys, err := scanKeys(ctx, c, pattern)
	if err != nil {
		return err
	}
	for i := 0; i < len(keys); i += 1000 {
		if err := c.Unlink(ctx, keys[i:min(i+1000, len(keys))]...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// classes returns the classes of m in a stable order, "lock" first.
func classes(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == "lock") != (out[j] == "lock") {
			return out[i] == "lock"
		}
		return out[i] < out[j]
	})
	return out
}

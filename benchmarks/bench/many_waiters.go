package bench

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ManyWaiters measures a lock whose waiters queue in Redis with w waiters:
// w+1 owners (spread over up to four Conns) lock one name in a loop with
// no critical section, so that one holds while w wait in the queue and
// every release hands the lock to the next. After a warm-up (each owner
// has had about one turn, so the queue is full) it reports, over the
// window, the server's script time per call and per acquisition (on a
// real server: INFO commandstats), the queue length seen mid-window, and
// the hand-off from each release to the next holder (Latency). Kinds
// whose waiters do not queue in Redis do not apply.
func ManyWaiters(ctx context.Context, cfg Config, k Kind, w int) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioManyWaiters, Count: w, Contenders: w + 1}
	st := &ManyWaitersStats{Waiters: w, QueueLen: -1}
	contend(ctx, cfg, k, &res, contendSpec{
		owners: w + 1, warmup: int64(w + 1), serverTime: true,
		mid: func(ctx context.Context, name string) { st.QueueLen = queueLen(ctx, cfg.Server, name) },
	})
	if c := res.Contention; c != nil {
		res.Latency = c.Handoff
	}
	res.ManyWaiters = st
	return res
}

// queueLen returns the length of the queue (a sorted set whose key holds
// name and ends in "queue") of the lock called name: 0 when there is no
// such key (nobody queued), -1 when unknown.
func queueLen(ctx context.Context, srv *Server, name string) int64 {
	c := srv.NewRedis(nil)
	defer c.Close()
	keys, err := scanKeys(ctx, c, "*"+name+"*queue")
	switch {
	case err != nil || len(keys) > 1:
		return -1
	case len(keys) == 0:
		return 0
	}
	n, err := c.ZCard(ctx, keys[0]).Result()
	if err != nil {
		return -1
	}
	return n
}

// scanKeys returns the keys matching pattern.
func scanKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sampler looks at every key of a run's locks every period while the
// workers run: a key without a TTL (a fencing counter aside, which must
// outlive its lock) is a finding, whatever the faults did.
type sampler struct {
	rdb     *redis.Client
	pattern string

	mu      sync.Mutex
	samples int // complete looks
	keys    int // keys seen, summed over the looks
	noTTL   []string
	stop    chan struct{}
	done    chan struct{}
}

func newSampler(rdb *redis.Client, pattern string, period time.Duration) *sampler {
	s := &sampler{rdb: rdb, pattern: pattern, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.look()
			}
		}
	}()
	return s
}

// close stops the sampler.
func (s *sampler) close() {
	close(s.stop)
	<-s.done
}

// look takes one sample; a server that does not answer (stalled,
// restarting) skips it.
func (s *sampler) look() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ttls, err := keyTTLs(ctx, s.rdb, s.pattern)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	s.keys += len(ttls)
	for k, ttl := range ttls {
		if ttl == -1 && !isFence(k) {
			s.noTTL = append(s.noTTL, fmt.Sprintf("%s at %s", k, time.Now().Format("15:04:05.000")))
		}
	}
}

// keyTTLs returns the PTTL of every key matching pattern (-1: none; keys
// gone between the SCAN and the PTTL are left out).
func keyTTLs(ctx context.Context, rdb *redis.Client, pattern string) (map[string]int64, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	cmds := make([]*redis.Cmd, len(keys))
	if len(keys) > 0 {
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.Do(ctx, "PTTL", k)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	out := make(map[string]int64, len(keys))
	for i, k := range keys {
		ttl, err := cmds[i].Int64()
		if err != nil {
			return nil, err
		}
		if ttl != -2 {
			out[k] = ttl
		}
	}
	return out, nil
}

func isFence(key string) bool  { return strings.HasSuffix(key, ":fence") }
func isRecord(key string) bool { return strings.Contains(key, ":r:") }

// leftovers waits until nothing of the locks is left but fencing counters
// and request records that expire by themselves, for at most d, and
// returns what is still there then.
func leftovers(rdb *redis.Client, pattern string, d time.Duration) ([]string, error) {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ttls, err := keyTTLs(ctx, rdb, pattern)
		cancel()
		if err != nil {
			return nil, err
		}
		var left []string
		for k, ttl := range ttls {
			if !isFence(k) && !(isRecord(k) && ttl > 0) {
				left = append(left, fmt.Sprintf("%s (pttl %d)", k, ttl))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relock-go/relock/benchmarks/bench"
)

// rueidislockValidity is rueidislock's default KeyValidity; it extends
// held locks every half of it.
const rueidislockValidity = 5 * time.Second

// rueidislockKind is rueidislock (github.com/redis/rueidis) with its
// defaults: 3 keys per lock (majority 2), 5s validity extended every
// 2.5s, wake-ups through client-side caching invalidations. Its commands
// are counted by wrapping its rueidis.Client; rueidis pipelines
// concurrent commands on its own, so its round trips are not observable
// and each command counts as one.
func rueidislockKind() bench.Kind {
	return bench.Kind{
		Name:   "rueidislock",
		Peer:   true,
		Renews: true,
		Note:   "rueidis v1.0.79 rueidislock defaults: 3 keys (majority 2), validity 5s extended every 2.5s, CSC wake-ups",
		Open: func(srv *bench.Server, cnt *bench.Counter, o bench.OpenOptions) (bench.Conn, error) {
			opt, err := rueidis.ParseURL(srv.URL)
			if err != nil {
				return nil, err
			}
			validity := rueidislockValidity
			if o.WatchdogTimeout > 0 {
				validity = o.WatchdogTimeout
			}
			lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption: opt,
				KeyValidity:  validity,
				ClientBuilder: func(opt rueidis.ClientOption) (rueidis.Client, error) {
					c, err := rueidis.NewClient(opt)
					if err != nil {
						return nil, err
					}
					return countingClient{Client: c, cnt: cnt}, nil
				},
			})
			if err != nil {
				return nil, err
			}
			return &rueidisConn{lk: lk, period: validity / 2}, nil
		},
	}
}

type rueidisConn struct {
	lk     rueidislock.Locker
	period time.Duration
}

func (c *rueidisConn) New(name string) bench.Locker { return &rueidisLock{lk: c.lk, name: name} }
func (c *rueidisConn) RenewPeriod() time.Duration   { return c.period }
func (c *rueidisConn) Close() error                 { c.lk.Close(); return nil }

type rueidisLock struct {
	lk      rueidislock.Locker
	name    string
	release func()
}

// Lock acquires the lock. rueidislock holds a lock for as long as the
// context given to WithContext lives, while bench.Locker's ctx bounds only
// the wait: the hold gets a context of its own, cancelled by Unlock, or at
// once if ctx ends before the lock is acquired.
func (l *rueidisLock) Lock(ctx context.Context) error {
	hold, cancelHold := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancelHold)
	_, release, err := l.lk.WithContext(hold, l.name)
	if !stop() {
		// ctx ended: the wait was cut short, or a hold just obtained is
		// being given back by cancelHold.
		if err == nil {
			release()
		}
		cancelHold()
		return fmt.Errorf("rueidislock: %w", ctx.Err())
	}
	if err != nil {
		cancelHold()
		return err
	}
	l.release = func() {
		release()
		cancelHold()
	}
	return nil
}

// Unlock cancels the lock's context, which is rueidislock's release: it
// returns once its keys are deleted.
func (l *rueidisLock) Unlock(context.Context) error {
	if l.release == nil {
		return errors.New("rueidislock: not held")
	}
	l.release()
	l.release = nil
	return nil
}

// countingClient counts the commands of a rueidis.Client.
type countingClient struct {
	rueidis.Client
	cnt *bench.Counter
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.cnt.Add(1, 1)
	return c.Client.Do(ctx, cmd)
}

func (c countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.cnt.Add(int64(len(multi)), 1)
	return c.Client.DoMulti(ctx, multi...)
}

func (c countingClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	r := c.Client.DoCache(ctx, cmd, ttl)
	if !r.IsCacheHit() {
		c.cnt.Add(1, 1)
	}
	return r
}

func (c countingClient) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	rs := c.Client.DoMultiCache(ctx, multi...)
	var n int64
	for _, r := range rs {
		if !r.IsCacheHit() {
			n++
		}
	}
	if n > 0 {
		c.cnt.Add(n, 1)
	}
	return rs
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"

	"github.com/relock-go/relock/benchmarks/bench"
)

// redislockTTL is the lock TTL given to bsm/redislock, which has no
// default and no automatic renewal: as long as relock's default watchdog
// timeout.
const redislockTTL = 30 * time.Second

// redislockKind is github.com/bsm/redislock on one go-redis client,
// polling with a linear retry every retry until the caller's ctx ends.
func redislockKind(retry time.Duration) bench.Kind {
	return bench.Kind{
		Name: fmt.Sprintf("bsm-%v", retry),
		Peer: true,
		Note: fmt.Sprintf("bsm/redislock v0.10.0: TTL %v, LinearBackoff(%v) until ctx ends, no renewal", redislockTTL, retry),
		Open: func(srv *bench.Server, cnt *bench.Counter, _ bench.OpenOptions) (bench.Conn, error) {
			rdb := srv.NewRedis(cnt)
			opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(retry)}
			return &redislockConn{close: rdb.Close, c: redislock.New(rdb), opt: opt}, nil
		},
	}
}

type redislockConn struct {
	close func() error
	c     *redislock.Client
	opt   *redislock.Options
}

func (c *redislockConn) New(name string) bench.Locker {
	return &redislockLock{c: c.c, key: name, opt: c.opt}
}
func (c *redislockConn) Close() error { return c.close() }

type redislockLock struct {
	c    *redislock.Client
	key  string
	opt  *redislock.Options
	held *redislock.Lock
}

func (l *redislockLock) Lock(ctx context.Context) error {
	lk, err := l.c.Obtain(ctx, l.key, redislockTTL, l.opt)
	if err != nil {
		return err
	}
	l.held = lk
	return nil
}

func (l *redislockLock) Unlock(ctx context.Context) error {
	if l.held == nil {
		return errors.New("redislock: not held")
	}
	err := l.held.Release(ctx)
	l.held = nil
	return err
}

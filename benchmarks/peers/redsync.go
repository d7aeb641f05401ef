package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/benchmarks/bench"
)

// redsyncKind is github.com/go-redsync/redsync/v4 on one go-redis client,
// with its defaults: 8s expiry, 32 tries, a random 50-250ms delay between
// tries, no automatic renewal.
func redsyncKind() bench.Kind {
	return bench.Kind{
		Name: "redsync",
		Peer: true,
		Note: "redsync/v4 defaults: expiry 8s, 32 tries 50-250ms apart, no renewal",
		Open: func(srv *bench.Server, cnt *bench.Counter, _ bench.OpenOptions) (bench.Conn, error) {
			rdb := srv.NewRedis(cnt)
			return &redsyncConn{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb))}, nil
		},
	}
}

type redsyncConn struct {
	rdb interface{ Close() error }
	rs  *redsync.Redsync
}

func (c *redsyncConn) New(name string) bench.Locker { return redsyncLock{c.rs.NewMutex(name)} }
func (c *redsyncConn) Close() error                 { return c.rdb.Close() }

type redsyncLock struct{ m *redsync.Mutex }

func (l redsyncLock) Lock(ctx context.Context) error { return l.m.LockContext(ctx) }

func (l redsyncLock) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock refused")
	}
	return err
}

// redsyncMultiKind is redsync over several independent masters (its
// Redlock), one go-redis client per master, with redsync's defaults.
func redsyncMultiKind(masters []*bench.Server) bench.Kind {
	return bench.Kind{
		Name:    fmt.Sprintf("redsync/redlock-%d", len(masters)),
		Peer:    true,
		Masters: len(masters),
		Note:    fmt.Sprintf("redsync/v4 over %d masters, defaults as above", len(masters)),
		Open: func(_ *bench.Server, cnt *bench.Counter, _ bench.OpenOptions) (bench.Conn, error) {
			c := &redsyncMultiConn{}
			var pools []redsyncredis.Pool
			for _, m := range masters {
				rdb := m.NewRedis(cnt)
				c.rdbs = append(c.rdbs, rdb)
				pools = append(pools, goredis.NewPool(rdb))
			}
			c.rs = redsync.New(pools...)
			return c, nil
		},
	}
}

type redsyncMultiConn struct {
	rdbs []*redis.Client
	rs   *redsync.Redsync
}

func (c *redsyncMultiConn) New(name string) bench.Locker { return redsyncLock{c.rs.NewMutex(name)} }

func (c *redsyncMultiConn) Close() error {
	var err error
	for _, rdb := range c.rdbs {
		if cerr := rdb.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

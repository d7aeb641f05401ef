package main

import (
	"context"
	"errors"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

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

package redistest

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook that counts the commands a client sends, a
// pipeline counting one per command and one round trip in all.
type Counter struct {
	cmds  atomic.Int64
	trips atomic.Int64
}

// Commands is the number of commands sent so far.
func (c *Counter) Commands() int64 { return c.cmds.Load() }

// RoundTrips is the number of round trips (a pipeline is one).
func (c *Counter) RoundTrips() int64 { return c.trips.Load() }

// Reset sets the counts to zero.
func (c *Counter) Reset() { c.cmds.Store(0); c.trips.Store(0) }

// DialHook implements redis.Hook.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		c.trips.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.cmds.Add(int64(len(cmds)))
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}

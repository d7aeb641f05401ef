package redistest

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Replay is a fault-injecting go-redis hook: while enabled, it sends every
// script command twice and keeps the second reply, as go-redis does when the
// first reply is lost (read timeout) and it retries. A script that is not
// idempotent then shows it: a hold counted twice, a spurious "not held".
type Replay struct {
	on      atomic.Bool
	Replays atomic.Int64
}

// Enable turns replaying on or off.
func (r *Replay) Enable(on bool) { r.on.Store(on) }

// DialHook implements redis.Hook.
func (r *Replay) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (r *Replay) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !r.on.Load() || !IsScript(cmd.Name()) {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		r.Replays.Add(1)
		cmd.SetErr(nil)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (r *Replay) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

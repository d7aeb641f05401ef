package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ErrInjected is the transient error a Faults hook returns.
var ErrInjected = errors.New("redistest: injected network failure")

// Faults is a go-redis hook that, while enabled, fails every command and
// pipeline without sending it, as a network partition would; or, in
// lose-replies mode, sends each command and then reports it failed, as a
// connection that breaks before the reply arrives. Lost replies spare the
// commands with which go-redis sets a new connection up (HELLO, CLIENT
// MAINT_NOTIFICATIONS, ...): go-redis 9.23 sends them through the hooks
// (9.7 did not), and losing one's reply would fail the command that
// needed the connection without sending it.
type Faults struct {
	on, lose atomic.Bool
	Failed   atomic.Int64

	mu     sync.Mutex
	hidden []error
}

// Hidden returns the errors of commands that failed by themselves while
// their replies were to be lost (LoseReplies): such a command may not
// have run, and a test that counts on its effect can say why it is
// missing.
func (f *Faults) Hidden() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.hidden...)
}

// Enable turns the failures on or off.
func (f *Faults) Enable(on bool) { f.on.Store(on) }

// LoseReplies turns the lost-reply mode on or off.
func (f *Faults) LoseReplies(on bool) { f.lose.Store(on) }

// DialHook implements redis.Hook.
func (f *Faults) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (f *Faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.on.Load() {
			f.Failed.Add(1)
			cmd.SetErr(ErrInjected)
			return ErrInjected
		}
		err := next(ctx, cmd)
		if f.lose.Load() && !Handshake(cmd) {
			if err != nil {
				f.mu.Lock()
				f.hidden = append(f.hidden, fmt.Errorf("%v: %w", cmd.Args()[0], err))
				f.mu.Unlock()
			}
			f.Failed.Add(1)
			cmd.SetErr(ErrInjected)
			return ErrInjected
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (f *Faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f.on.Load() {
			f.Failed.Add(1)
			for _, c := range cmds {
				c.SetErr(ErrInjected)
			}
			return ErrInjected
		}
		return next(ctx, cmds)
	}
}

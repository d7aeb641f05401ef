package redistest

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A go-redis client's AddHook is not safe while the client is in use
// (it rebuilds the hook chain unlocked), and a relock.Client is always
// about to use its client: the watchdog renews, the sweeper deletes done
// requests' records after a release. The clients made here carry one
// hook from the start that runs the hooks AddHook gives it later.
var late sync.Map // redis.UniversalClient -> *lateHooks

// AddHook adds h to rdb, in use or not: on a client made by Server.Client
// it takes effect from the next command on, without a race; on any other
// client it is rdb.AddHook (to be called before the client is used).
func AddHook(rdb redis.UniversalClient, h redis.Hook) {
	if l, ok := late.Load(rdb); ok {
		l.(*lateHooks).add(h)
		return
	}
	rdb.AddHook(h)
}

// withLateHooks installs rdb's late hook, forgotten at the end of t.
func withLateHooks(t interface{ Cleanup(func()) }, rdb redis.UniversalClient) {
	l := &lateHooks{}
	rdb.AddHook(l)
	late.Store(rdb, l)
	t.Cleanup(func() { late.Delete(rdb) })
}

// lateHooks is a redis.Hook that runs the hooks added to it so far, the
// first added outermost (as go-redis chains them).
type lateHooks struct {
	mu    sync.Mutex
	hooks []redis.Hook
}

func (l *lateHooks) add(h redis.Hook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = append(l.hooks[:len(l.hooks):len(l.hooks)], h)
}

func (l *lateHooks) load() []redis.Hook {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hooks
}

func (l *lateHooks) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		f := next
		hs := l.load()
		for i := len(hs) - 1; i >= 0; i-- {
			f = hs[i].DialHook(f)
		}
		return f(ctx, network, addr)
	}
}

func (l *lateHooks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f := next
		hs := l.load()
		for i := len(hs) - 1; i >= 0; i-- {
			f = hs[i].ProcessHook(f)
		}
		return f(ctx, cmd)
	}
}

func (l *lateHooks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f := next
		hs := l.load()
		for i := len(hs) - 1; i >= 0; i-- {
			f = hs[i].ProcessPipelineHook(f)
		}
		return f(ctx, cmds)
	}
}

package scripts

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Caller is what a script is sent through: a client, a connection of one
// node (WithSyncReplicas), or a pipeline.
type Caller interface {
	redis.Scripter
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// Runner runs relock's scripts for one Client: as functions of the
// library (FCALL), loaded with FUNCTION LOAD on a server's first "Function
// not found" (a new server, a restart without persistence, FUNCTION
// FLUSH), where servers have them; or, for good once a server lacks
// functions (miniredis, Redis before 7) or refuses them (an ACL user
// without +fcall or +function|load), as scripts (EVALSHA, then EVAL on
// NOSCRIPT). Its methods are safe for concurrent use.
type Runner struct {
	rdb     redis.UniversalClient
	sharded bool

	off   atomic.Bool
	once  sync.Once
	onOff func(reason error) // told once, when functions are given up
}

// NewRunner returns the Runner of a Client on rdb (sharded: a Cluster's
// client). onOff, if not nil, is called once if functions are given up,
// with why.
func NewRunner(rdb redis.UniversalClient, sharded bool, onOff func(reason error)) *Runner {
	r := &Runner{rdb: rdb, sharded: sharded, onOff: onOff}
	if _, ok := rdb.(*redis.Ring); ok {
		// A Ring loads keyless commands on any shard: scripts, which
		// every shard loads on its own NOSCRIPT.
		r.off.Store(true)
	}
	return r
}

// Functions reports whether scripts run as functions.
func (r *Runner) Functions() bool { return !r.off.Load() }

// Off gives functions up for good, because of reason (a Redis error:
// told to onOff as one of ErrNoFunctions and ErrFunctionsRefused, never
// with the server's message, which may quote the call's arguments).
func (r *Runner) Off(reason error) {
	if r.off.CompareAndSwap(false, true) && r.onOff != nil {
		why := ErrNoFunctions
		if strings.HasPrefix(strings.ToLower(reason.Error()), "noperm") {
			why = ErrFunctionsRefused
		}
		r.once.Do(func() { r.onOff(why) })
	}
}

// Why functions were given up (see Runner.Off).
var (
	ErrNoFunctions      = errors.New("the server has no FCALL or FUNCTION LOAD (miniredis, Redis before 7)")
	ErrFunctionsRefused = errors.New("the ACL user may not run FCALL or FUNCTION LOAD")
)

// Run sends s with keys and args through via.
func (r *Runner) Run(ctx context.Context, via Caller, s *Script, keys []string, args ...any) *redis.Cmd {
	if r.Functions() {
		cmd := via.FCall(ctx, s.Function(r.sharded), keys, args...)
		err := cmd.Err()
		switch {
		case err == nil:
			return cmd
		case NotFound(err):
			lerr := r.Load(ctx, via, keys)
			if lerr == nil {
				return via.FCall(ctx, s.Function(r.sharded), keys, args...)
			}
			if !Unusable(lerr) {
				return cmd // unreachable, say: the caller sees why
			}
			r.Off(lerr)
		case Unusable(err):
			r.Off(err)
		default:
			return cmd
		}
	}
	return s.Eval(r.sharded).Run(ctx, via, keys, args...)
}

// Load loads the library on the server that serves keys through via:
// via itself (a client of one server, a node's connection), or on a
// Cluster every master (a call that go-redis followed to another node
// than its view names for the slot, during a migration, found that node
// without the library: it may be any of them).
func (r *Runner) Load(ctx context.Context, via Caller, keys []string) error {
	_, src := Library()
	type loader interface {
		FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
	}
	if cc, ok := via.(*redis.ClusterClient); ok {
		// A master out of reach is no reason to give up: the call is sent
		// again, and answers for itself.
		var mu sync.Mutex
		var refused error
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := node.FunctionLoadReplace(ctx, src).Err(); Unusable(err) {
				mu.Lock()
				refused = err
				mu.Unlock()
			}
			return nil
		})
		return refused
	}
	l, ok := via.(loader)
	if !ok {
		return errors.New("relock: cannot load functions through a pipeline")
	}
	return l.FunctionLoadReplace(ctx, src).Err()
}

// NotFound reports whether err is Redis's answer to an FCALL of a
// function it does not have: the library is not loaded there.
func NotFound(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "Function not found")
}

// Unusable reports whether err says that functions cannot be used on the
// server: an unknown command (no functions: miniredis, Redis before 7) or
// one the ACL user may not run.
func Unusable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	about := strings.Contains(msg, "fcall") || strings.Contains(msg, "function")
	return about && (strings.HasPrefix(msg, "noperm") || strings.Contains(msg, "unknown command"))
}

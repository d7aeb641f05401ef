package bench

import (
	"cmp"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
)

// Names of relock's kinds.
const (
	KindMutex     = "relock/mutex"
	KindReentrant = "relock/reentrant"
	KindFair      = "relock/fair"
	KindRWLock    = "relock/rwlock"
)

// relockDefaultWatchdog is relock's default watchdog timeout, which
// relock.New uses when no option is given.
const relockDefaultWatchdog = 30 * time.Second

// relockKinds lists relock's lock types. A lock type is added by a file
// of its own (relock_fair.go, relock_rwlock.go) whose init appends it.
var relockKinds = []Kind{
	RelockKind(KindMutex, func(c *relock.Client, name string) Locker { return mutex.New(c, name) }),
	RelockKind(KindReentrant, func(c *relock.Client, name string) Locker { return reentrant.New(c, name) }),
}

// RelockKinds returns relock's lock types, with default options (the
// watchdog keeps locks alive), mutex first, those measured in some
// scenarios only (Kind.Only) last.
func RelockKinds() []Kind {
	out := append([]Kind(nil), relockKinds...)
	only := func(k Kind) int { return min(1, len(k.Only)) }
	slices.SortStableFunc(out, func(a, b Kind) int { return cmp.Compare(only(a), only(b)) })
	return out
}

// RelockKind returns the Kind of a relock lock type made by newLock on a
// relock.Client of its own go-redis client. This is the whole adapter:
// relock's handles already have Lock(ctx) and Unlock(ctx) (and the rwlock
// RLock and RUnlock). With -cluster, Main also runs it on the cluster.
func RelockKind(name string, newLock func(c *relock.Client, name string) Locker) Kind {
	return relockKind(name, newLock, func(srv *Server, cnt *Counter) redis.UniversalClient { return srv.NewRedis(cnt) })
}

// relockKind is RelockKind on the go-redis client that dial returns.
func relockKind(name string, newLock func(c *relock.Client, name string) Locker, dial func(*Server, *Counter) redis.UniversalClient) Kind {
	// Constructors never fail, not even on a nil Client: probe the type.
	_, shared := newLock(nil, "probe").(RLocker)
	return Kind{
		Name:     name,
		Shared:   shared,
		Baseline: name == KindMutex,
		Renews:   true,
		Queue:    true,
		Note:     "defaults (watchdog, pub/sub wake-ups)",
		newLock:  newLock,
		Open: func(srv *Server, cnt *Counter, o OpenOptions) (Conn, error) {
			rdb := dial(srv, cnt)
			timeout := relockDefaultWatchdog
			var opts []relock.Option
			if o.WatchdogTimeout > 0 {
				timeout = o.WatchdogTimeout
				opts = append(opts, relock.WithWatchdogTimeout(timeout))
			}
			c := relock.New(rdb, opts...)
			if err := c.Err(); err != nil {
				_ = c.Close()
				_ = rdb.Close()
				return nil, err
			}
			return &relockConn{rdb: rdb, c: c, newLock: newLock, period: timeout / 3}, nil
		},
	}
}

type relockConn struct {
	rdb     redis.UniversalClient
	c       *relock.Client
	newLock func(*relock.Client, string) Locker
	period  time.Duration
}

func (r *relockConn) New(name string) Locker       { return r.newLock(r.c, name) }
func (r *relockConn) Redis() redis.UniversalClient { return r.rdb }
func (r *relockConn) RenewPeriod() time.Duration   { return r.period }
func (r *relockConn) Close() error {
	err := r.c.Close()
	if cerr := r.rdb.Close(); err == nil {
		err = cerr
	}
	return err
}

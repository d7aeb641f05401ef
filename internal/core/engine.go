// Package core is the machinery every relock lock type is built on: the
// per-client Engine (Redis client, watchdog, wake-up hub), lock options and
// validation, key naming, the blocking wait loop, and the exclusive-lock
// state machine shared by the mutex, reentrant and fair locks.
package core

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/shard"
	"github.com/relock-go/relock/internal/watchdog"
)

// Engine is what a relock.Client owns: one Redis client, one watchdog
// goroutine and one wake-up hub (a pub/sub connection per shard), shared by
// every lock made from it.
type Engine struct {
	RDB redis.UniversalClient
	WD  *watchdog.Watchdog
	Hub *notify.Hub
	// Scripts runs relock's scripts: as functions where the servers have
	// them, else as scripts.
	Scripts *scripts.Runner
	// Records deletes the request records of requests that are done.
	Records *Sweeper

	// Err is set when the client itself is unusable (nil Redis client,
	// invalid options); every lock operation returns it.
	Err error

	obs  *observers    // nil when nobody observes: the lock path skips events
	poll time.Duration // > 0: waits poll instead of subscribing
	// sharded: a Redis Cluster's client, whose scripts publish wake-ups
	// with SPUBLISH (the hub subscribes with SSUBSCRIBE on each master).
	sharded bool

	closeOnce sync.Once
	closed    chan struct{}
}

// Config is a client's configuration.
type Config struct {
	WatchdogLease time.Duration
	// Observers get every event (relock.WithObserver).
	Observers []func(Event)
	// Logger logs losses, failed renewal rounds and failed acquires, and
	// observers that panic (relock.WithLogger).
	Logger *slog.Logger
	// Poll, if > 0, makes waits poll every Poll instead of subscribing
	// to pushed wake-ups (relock.WithPolling).
	Poll time.Duration
}

// DefaultWatchdogLease is Redisson's default lockWatchdogTimeout.
const DefaultWatchdogLease = 30 * time.Second

// Lease bounds, checked before any Redis call.
const (
	MinLease = 10 * time.Millisecond
	MaxLease = 7 * 24 * time.Hour
)

// NewEngine returns an engine for rdb, or one whose Err says why it cannot
// work. A usable engine has started its watchdog goroutine.
func NewEngine(rdb redis.UniversalClient, cfg Config, cfgErr error) *Engine {
	e := &Engine{RDB: rdb, closed: make(chan struct{})}
	switch {
	case isNil(rdb):
		e.Err = lockerr.NilClient
	case cfgErr != nil:
		e.Err = cfgErr
	default:
		if err := CheckLease("watchdog timeout", cfg.WatchdogLease); err != nil {
			e.Err = err
		}
	}
	if e.Err != nil {
		return e
	}
	fs := cfg.Observers
	if cfg.Logger != nil {
		fs = append(fs[:len(fs):len(fs)], logEvents(cfg.Logger))
	}
	var roundFailed func(int, error)
	if len(fs) > 0 {
		e.obs = &observers{fs: fs, logger: cfg.Logger}
		roundFailed = func(holds int, err error) {
			e.obs.emit(Event{Type: EventRenewalFailed, Holds: holds, Err: err})
		}
	}
	e.Hub = notify.New(rdb)
	e.poll = cfg.Poll
	e.sharded = e.Hub.Sharded()
	e.Scripts = scripts.NewRunner(rdb, e.sharded, func(reason error) {
		if cfg.Logger != nil {
			cfg.Logger.Info("relock: Redis functions unavailable; running scripts instead (EVALSHA)", "reason", reason)
		}
	})
	e.WD = watchdog.New(rdb, cfg.WatchdogLease, e.Scripts, roundFailed)
	e.Records = NewSweeper(rdb)
	e.Hub.OnRefused = func(err error) {
		e.Emit(Event{Type: EventPushUnavailable, Err: err})
	}
	return e
}

// Close stops the watchdog and the hub (see Watchdog.Close and Hub.Close
// for how long each waits), and deletes the request records that are due
// (see Sweeper). Holds still held are declared lost; blocked acquires
// return an error matching lockerr.Closed and lockerr.NotObtained.
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.closed)
		if e.Err != nil {
			return
		}
		e.WD.Close()
		e.Records.Close()
		err = e.Hub.Close()
	})
	return err
}

// Observing reports whether anybody observes events: when not, the lock
// path builds none.
func (e *Engine) Observing() bool { return e.obs != nil }

// Emit gives ev to every observer, from the calling goroutine; the caller
// holds no lock of its own.
func (e *Engine) Emit(ev Event) {
	if e.obs != nil {
		e.obs.emit(ev)
	}
}

// Closed is closed when Close has been called.
func (e *Engine) Closed() <-chan struct{} { return e.closed }

// Polling is the interval at which waits poll instead of subscribing
// (relock.WithPolling), or 0 when they subscribe to pushed wake-ups.
func (e *Engine) Polling() time.Duration { return e.poll }

// Usable returns why the engine cannot serve a lock operation, or nil.
func (e *Engine) Usable() error {
	if e == nil {
		return lockerr.NilClient
	}
	if e.Err != nil {
		return e.Err
	}
	select {
	case <-e.closed:
		return lockerr.Closed
	default:
		return nil
	}
}

// unwrap maps a *relock.Client to its engine; set by the root package.
var unwrap func(any) *Engine

// RegisterUnwrap is called once by the root package's init so that lock
// packages can reach a Client's engine without it being exported.
func RegisterUnwrap(f func(any) *Engine) { unwrap = f }

// Of returns c's engine, or nil for a nil client.
func Of(c any) *Engine {
	if unwrap == nil || c == nil {
		return nil
	}
	return unwrap(c)
}

// isNil reports whether rdb is nil, including a typed nil of go-redis's
// client types (which would otherwise panic on first use).
func isNil(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// IsRedisError reports whether err is an error reply from Redis (the
// command was refused or failed there), as opposed to a transport or
// context error after which the command may or may not have run. A reply
// that go-redis sends the command again on is not one either: a Cluster's
// refusal of a moving slot (shard.Moving), or a server loading its data,
// a replica refusing a write, no master or too few replicas (retried):
// it is the last of several tries, and an earlier one, whose reply was
// lost (a connection cut by a failover or a restart), may have run.
// (Another refusal after a lost reply, such as OOM on the try after a
// timeout, is taken as "not run": rare, and not told apart.)
func IsRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !errors.Is(err, redis.Nil) && !shard.Moving(err) && !retried(rerr)
}

// retried reports whether go-redis sends a command again after the reply
// rerr: what its shouldRetry retries on, in v9.7 and in later versions
// (MASTERDOWN, NOREPLICAS, and a script's error that carries a replica's
// READONLY, as Redis 6 reports a write in a script on a replica).
func retried(rerr redis.Error) bool {
	msg := rerr.Error()
	for _, p := range []string{"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "NOREPLICAS ", "ERR max number of clients reached"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "-READONLY You can't write against a read only replica")
}

// Package bench measures distributed locks on Redis: relock's lock types
// and, through the same small adapter, other Go lock libraries.
//
// A lock type or library is a Kind: a name and an Open function that
// connects one "process" (a Redis client and whatever the library shares
// per client) and returns a Conn, which makes one Locker (an owner, a
// handle) per call to New. Adding a lock type is one such adapter; the
// scenarios (Uncontended, Handoff, HandoffContended, Contention,
// ReadHeavy, ManyReaders, ManyWaiters, ManyLocks, Watchdog, Memory,
// ServerCost) and
// the report (table, ratios, JSON, SVG) need no change.
//
// Every Redis command a Kind sends must go through the Counter given to
// Open (Server.NewRedis attaches it to a go-redis client), so that commands
// and round trips per operation can be reported. Pub/sub subscriptions are
// not commands of go-redis's command path and are not counted.
//
// The figures are only as good as the machine: run relock and the peers in
// one run, against one server, and compare ratios, not absolute numbers
// from different runs. Figures from the embedded miniredis are not Redis
// figures.
package bench

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Locker is one owner of a named lock, as a process would hold it. A
// Locker is used by one goroutine at a time.
type Locker interface {
	// Lock acquires the lock, waiting until it is free or ctx ends. ctx
	// bounds the wait only: the hold lasts until Unlock (an adapter for a
	// library whose holds end with a context gives them one of their own).
	Lock(ctx context.Context) error
	// Unlock releases a lock acquired by Lock.
	Unlock(ctx context.Context) error
}

// RLocker is a Locker with a shared (read) side, as sync.RWMutex has.
type RLocker interface {
	Locker
	// RLock acquires a read hold, waiting until no writer holds or
	// waits (as the lock type defines it) or ctx ends.
	RLock(ctx context.Context) error
	// RUnlock releases a read hold acquired by RLock.
	RUnlock(ctx context.Context) error
}

// TryLocker is a Locker that can also make a single attempt: TryLock
// reports whether it acquired, and never waits (for a read/write lock: the
// write side).
type TryLocker interface {
	Locker
	TryLock(ctx context.Context) (bool, error)
}

// Conn is one process's connection for a Kind: its Redis client(s) and
// whatever the library shares between the locks made from it.
type Conn interface {
	// New returns a new owner (handle) of the lock called name.
	New(name string) Locker
	// Close releases the connection's resources.
	Close() error
}

// Renewer is implemented by a Conn whose held locks are kept alive
// automatically (a watchdog), renewing each hold every RenewPeriod.
type Renewer interface {
	RenewPeriod() time.Duration
}

// RedisClienter is implemented by a Conn that runs on one go-redis client;
// the uncontended scenario then measures its raw floor on that very client.
type RedisClienter interface {
	Redis() redis.UniversalClient
}

// OpenOptions are the settings a scenario asks of a Kind's Open.
type OpenOptions struct {
	// WatchdogTimeout, when > 0, is the lease that automatic renewal
	// keeps held locks at (relock.WithWatchdogTimeout, rueidislock's
	// KeyValidity). 0 means the library's default.
	WatchdogTimeout time.Duration
}

// Kind is a lock type or a lock library under test.
type Kind struct {
	// Name identifies the kind in reports, e.g. "relock/mutex", "redsync".
	Name string
	// Peer marks a library other than relock: relock's figures are
	// compared with it as ratios.
	Peer bool
	// Baseline marks an exclusive kind that runs the read-heavy scenario
	// although it has no read side, as the figure to beat for kinds that
	// have one.
	Baseline bool
	// Shared says that the kind has a read side: its Lockers are
	// RLockers, and the read-heavy scenario applies.
	Shared bool
	// Renews says that held locks are kept alive automatically: Open
	// returns a Renewer, and the watchdog scenario applies.
	Renews bool
	// Queue says that waiters queue in Redis (a release hands the lock
	// over): the many-waiters scenario and the redis-memory scenario's
	// waiters apply.
	Queue bool
	// Masters is the number of independent masters of a multi-master
	// (Redlock) kind, 0 for a kind on one server. Such a kind runs only
	// the uncontended and hand-off scenarios, its Open ignores the server
	// it is given, and it is compared only with the peers of as many
	// masters.
	Masters int
	// Cluster is the Redis Cluster that a cluster kind (-cluster: one of
	// relock's kinds on a go-redis ClusterClient) runs on, nil for a kind
	// on one server. Such a kind runs only the uncontended and hand-off
	// scenarios, its Open ignores the server it is given, its floors are
	// measured on the cluster, and it is compared with the same lock type
	// on the single server.
	Cluster *Cluster
	// Only, when set, lists the only scenarios the kind runs (a lock
	// type measured for its server cost alone); the others are not
	// planned for it at all.
	Only []string
	// Note is a short description shown in reports (options used).
	Note string
	// Open connects one process to srv. Every command it sends goes
	// through cnt.
	Open func(srv *Server, cnt *Counter, o OpenOptions) (Conn, error)

	// newLock makes the lock of one of relock's kinds (RelockKind), which
	// -cluster runs again on a cluster client; nil for other kinds.
	newLock func(c *relock.Client, name string) Locker
}

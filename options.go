package relock

import (
	"time"

	"github.com/relock-go/relock/internal/core"
)

// Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	core.Config
	err error
}

// WithWatchdogTimeout sets the lease of locks that have no fixed lease
// (Redisson's lockWatchdogTimeout; default 30s). The watchdog renews such
// locks every timeout/3 while they are held, so a crashed holder's lock
// expires within one timeout. It must lie in [10ms, 7 days].
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *clientConfig) {
		c.WatchdogLease = d
		if err := core.CheckLease("watchdog timeout", d); err != nil && c.err == nil {
			c.err = err
		}
	}
}

// LockOption configures one lock handle.
type LockOption func(*core.LockConfig)

// WithLease gives the lock a fixed lease with no renewal (Redisson's
// leaseTime): the lock expires d after it was acquired (or re-entered)
// unless it is released first, and the handle's Lost channel fires when
// that local deadline passes. d must lie in [10ms, 7 days].
func WithLease(d time.Duration) LockOption {
	return func(c *core.LockConfig) {
		c.Lease = d
		if err := core.CheckLease("lease", d); err != nil && c.Err == nil {
			c.Err = err
		}
	}
}

// WithFencing makes every new hold obtain a fencing token that strictly
// increases per lock name (across handles, Clients and processes), read
// with the handle's Fence method. Pass the token to the resource that the
// lock protects, and have it reject a token lower than one it has seen:
// that is what keeps a paused or partitioned former holder out, and how a
// token going backwards (Redis lost its data) is detected.
//
// The counter is a Redis key without a TTL (it must outlive the lock to
// stay monotonic); it is the one key relock leaves behind.
func WithFencing() LockOption {
	return func(c *core.LockConfig) { c.Fencing = true }
}

// WithSyncReplicas makes every new hold wait until n replicas of the
// lock's master have it: after an acquire, the handle sends WAIT n timeout
// on the connection that sent it (on a Cluster, to the lock's node). If
// fewer than n confirm within timeout, the lock is given back at once and
// Lock and TryLock return an error matching ErrNotReplicated (Lock does
// not keep trying: replicas that are not there will not appear by
// waiting; retry at a higher level). A renewal by the watchdog moves the
// holder's local deadline only once n replicas confirmed it, so a holder
// whose replicas are gone loses the hold at its local deadline. A grant
// pushed by a release is taken by an attempt (one more round trip), which
// waits for the replicas too. The wait ends with the call's ctx: at its
// deadline, or within 100 ms of its cancellation (WAIT cannot be
// interrupted: it is sent in slices of 100 ms while the ctx can end). An
// acquire then gives the lock back, and its error matches ErrNotObtained
// and the ctx's error. An Extend whose replicas do not confirm (or whose
// ctx ends first) returns ErrNotReplicated (or the ctx's error) and keeps
// the local deadline it had, or the new lease's if that is sooner: the
// extension stands at the master only.
//
// It narrows the window in which a failover can let two owners in: a
// replica promoted right after a grant has the lock. It does not close
// it: WAIT is not consensus (a replica that acknowledged can still lose
// the write in a later failover or restart, and Redis replication stays
// asynchronous), and it cannot help against split brain. n must be at
// least 1 and timeout lie in [1ms, 1m]. Not available on a go-redis Ring.
func WithSyncReplicas(n int, timeout time.Duration) LockOption {
	return func(c *core.LockConfig) {
		c.SyncReplicas, c.SyncTimeout = n, timeout
		if err := core.CheckSyncReplicas(n, timeout); err != nil && c.Err == nil {
			c.Err = err
		}
	}
}

// WithToken makes the handle's owner token token instead of a random one:
// the handle is then the owner of whatever holds that token has, as
// redsync's WithValue and bsm/redislock's Token allow. Use it to hand a
// hold over (a dispatcher locks, and a worker in another process that was
// given Token() resumes the hold with Resume and unlocks it), or to let a
// restarted process resume its own hold.
//
// The token is a capability: whoever has it can extend and release the
// hold. It must be 16 to 128 bytes of A-Z, a-z, 0-9 and . _ ~ + / = -
// (say, 32 random hex digits, a UUID, base64 of 16 random bytes);
// otherwise every call of the handle returns an error matching
// ErrInvalidOption. relock never shows it in errors, logs, events or
// metrics (only its fingerprint, see the handles' Fingerprint).
//
// Two handles with one token are one owner at Redis: each can renew,
// extend, re-enter and release the other's hold, and a Lock by one while
// the other holds the lock succeeds (for a mutex too: it takes the hold
// over, it does not wait). Each handle counts only the holds it took or
// resumed, and its watchdog renews them, so two live handles of one token
// keep each other's hold alive and an Unlock by either ends it. That is
// the point of a hand-over, and nothing else: do not use one token for two
// holders that work at once.
func WithToken(token string) LockOption {
	return func(c *core.LockConfig) {
		c.Token = token
		if err := core.CheckToken(token); err != nil && c.Err == nil {
			c.Err = err
		}
	}
}

// WithMetadata makes the handle show m to others while it holds or
// waits for its lock: a few words saying who holds it, such as the host
// and process ("web-3 pid 4711"), or the job. Anybody can read it, with
// the lock handles' Holders method and the relock command (inspect, list,
// watch, and their -json); it is stored with the hold at Redis and goes
// with it. m may be any text of at most 256 bytes (longer: every call of
// the handle returns an error matching ErrInvalidOption); "" is none.
// Do not put secrets in it. A mutex with metadata takes its first
// attempt with the acquire script instead of a plain SET NX only when it
// has fencing too (the value is then token, fence and metadata), so an
// uncontended cycle stays two commands.
func WithMetadata(m string) LockOption {
	return func(c *core.LockConfig) {
		c.Metadata = m
		if err := core.CheckMetadata(m); err != nil && c.Err == nil {
			c.Err = err
		}
	}
}

// WithHeartbeat sets how long a waiter of this handle keeps its place in
// its lock's queue without showing it is alive (default 5s), for every lock
// type (the fair lock's queue, the mutex and reentrant locks' hand-over
// queue, the rwlock's waiting writers and readers). Live waiters refresh it
// several times per period (every attempt, at least every d/4), however
// long they wait; a waiter whose process died is dropped after at most d,
// so it delays the others by at most d. A lock granted to a waiter on
// release carries a claim lease of d/2 (at most the lock's lease) until the
// waiter's watchdog claims it: a waiter that died right after its last
// heartbeat holds the lock up for at most that. It must lie in [10ms, 7
// days].
func WithHeartbeat(d time.Duration) LockOption {
	return func(c *core.LockConfig) {
		c.Heartbeat = d
		if err := core.CheckLease("heartbeat", d); err != nil && c.Err == nil {
			c.Err = err
		}
	}
}

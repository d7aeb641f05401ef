package core

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/shard"
)

// Owner is what every lock handle is: one random 128-bit owner token on one
// lock, with the options it was made with and the error (if any) that its
// constructor arguments deserve.
type Owner struct {
	E     *Engine
	Kind  string
	Name  string
	Keys  Keys
	Cfg   LockConfig
	Token string

	// err is the constructor-time error (bad client, name or option),
	// returned by every call.
	err  error
	seq  uint64      // request ids; guarded by the handle's mutex
	ids  string      // prefix of request ids: random for a chosen token (see NextRequest)
	conn *redis.Conn // pinned for WithSyncReplicas during an attempt; guarded likewise
}

// NewOwner validates its arguments and returns the owner; an invalid
// argument is kept and returned by Check, never panicked on.
func NewOwner(c any, kind, name string, opts []func(*LockConfig)) Owner {
	var cfg LockConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	u := uuid.New() // crypto/rand
	o := Owner{
		E:     Of(c),
		Kind:  kind,
		Name:  name,
		Keys:  NewKeys(kind, name),
		Cfg:   cfg,
		Token: hex.EncodeToString(u[:]),
	}
	if cfg.Token != "" {
		// Handles with one token share a request record: each numbers
		// its requests after a random prefix of its own, so that one
		// never takes another's record for a resend of its own request.
		o.Token = cfg.Token
		o.ids = hex.EncodeToString(u[:4]) + "."
	}
	switch {
	case o.E == nil:
		o.err = lockerr.NilClient
	case cfg.Err != nil:
		o.err = cfg.Err
	default:
		o.err = CheckName(name)
	}
	if o.err == nil && cfg.SyncReplicas > 0 {
		o.err = syncSupported(o.E.RDB)
	}
	return o
}

// Check returns why the owner cannot operate: an invalid constructor
// argument, or a client that is unusable or closed.
func (o *Owner) Check() error {
	if o.err != nil {
		return o.err
	}
	return o.E.Usable()
}

// CheckAcquire returns why an acquire asking for lease cannot be made:
// Check's reasons, or, with fixed (LockFor and the like), a lease out of
// bounds. Without fixed, lease is 0 (the owner's own).
func (o *Owner) CheckAcquire(lease time.Duration, fixed bool) error {
	if err := o.Check(); err != nil {
		return err
	}
	if fixed {
		return CheckLease("lease", lease)
	}
	return nil
}

// Lease is the lease of this owner's holds: the fixed lease if one was
// given, else the client's watchdog lease.
func (o *Owner) Lease() time.Duration {
	if o.Cfg.Lease > 0 {
		return o.Cfg.Lease
	}
	return o.E.WD.Lease()
}

// Heartbeat is how long this owner's queue entry lasts unless the owner
// shows it is alive again (relock.WithHeartbeat, default DefaultHeartbeat).
func (o *Owner) Heartbeat() time.Duration {
	if o.Cfg.Heartbeat > 0 {
		return o.Cfg.Heartbeat
	}
	return DefaultHeartbeat
}

// Claim is the lease with which a release grants the lock to this owner
// while it waits: half its heartbeat (no more than its lease), so that a
// waiter that died after its last heartbeat holds the lock up for at most
// that long. The waiter's watchdog turns it into the full lease at once.
func (o *Owner) Claim() time.Duration { return min(o.Lease(), o.Heartbeat()/2) }

// Metadata returns the owner's metadata (relock.WithMetadata) as the
// optional last argument of an acquire script: none when it has none (an
// argument costs the script).
func (o *Owner) Metadata() []any {
	if o.Cfg.Metadata == "" {
		return nil
	}
	return []any{o.Cfg.Metadata}
}

// Watched reports whether the watchdog renews this owner's holds.
func (o *Owner) Watched() bool { return o.Cfg.Lease == 0 }

// NextRequest returns a request id unique for this owner. The caller holds
// the handle's mutex.
func (o *Owner) NextRequest() string {
	o.seq++
	return o.ids + strconv.FormatUint(o.seq, 36)
}

// MaxRecordTTL bounds how long a request record is kept. go-redis with its
// defaults (3 s read timeout, 3 retries, backoff up to 512 ms) gives up on a
// command within about 14 s of sending it; the handle sends a script that a
// Cluster refused while its slot moves again for about 10 s
// (shard.MaxUnsettled). With a lease under 10 s the record can expire
// before such a resend: a release whose first try ran (its reply lost) then
// answers 0 and its Unlock reports a loss, which is spurious but safe.
const MaxRecordTTL = 15 * time.Second

// RecordTTL is Request.RecordTTL for a request with the owner's lease.
//
// Records are kept whether or not the client resends: the handle itself
// resends a release whose reply was lost, and the abort of an acquire
// whose outcome is unknown needs the acquire's record. (A review showed
// that without them a resent partial release is applied twice and a late
// acquire is not undone.)
func (o *Owner) RecordTTL() int64 { return min(o.Lease(), MaxRecordTTL).Milliseconds() }

// Run runs script on the owner's Redis client, or on its pinned
// connection during a WithSyncReplicas attempt (the caller holds the
// handle's mutex), as the Client's Runner does (a function, or a script);
// on a Cluster, its twin that publishes wake-ups with SPUBLISH, declaring
// one key more (Keys.Absent). A script that a Cluster refuses while its
// slot moves is sent again (see again).
func (o *Owner) Run(ctx context.Context, s *scripts.Script, keys []string, args ...any) *redis.Cmd {
	keys = o.forCluster(keys)
	return o.send(ctx, o.scripter(), o.conn != nil, func(ctx context.Context, via scripts.Caller) *redis.Cmd {
		return o.E.Scripts.Run(ctx, via, s, keys, args...)
	})
}

// RunShared is Run on the owner's Redis client, never on a pinned
// connection: for calls made without the handle's mutex (an operator's
// force-unlock, a semaphore's count), which must not share the
// connection of an attempt in flight.
func (o *Owner) RunShared(ctx context.Context, s *scripts.Script, keys []string, args ...any) *redis.Cmd {
	keys = o.forCluster(keys)
	return o.send(ctx, o.E.RDB, false, func(ctx context.Context, via scripts.Caller) *redis.Cmd {
		return o.E.Scripts.Run(ctx, via, s, keys, args...)
	})
}

// forCluster returns keys, with the lock's never-created key
// (Keys.Absent) last on a Cluster.
func (o *Owner) forCluster(keys []string) []string {
	if !o.E.sharded {
		return keys
	}
	return append(keys[:len(keys):len(keys)], o.Keys.Absent())
}

// Absent returns the lock's never-created key (Keys.Absent) on a Cluster,
// where a call that declares it runs only at a master whose slot is
// settled, and "" elsewhere: what a watchdog hold of the lock carries
// (watchdog.Hold.Absent).
func (o *Owner) Absent() string {
	if !o.E.sharded {
		return ""
	}
	return o.Keys.Absent()
}

// send runs call via the owner's client or pinned connection, calling it
// again while a Cluster refuses it because its slot moves (see again).
func (o *Owner) send(ctx context.Context, via scripts.Caller, pinned bool, call func(context.Context, scripts.Caller) *redis.Cmd) *redis.Cmd {
	first := time.Now()
	for tries := 1; ; tries++ {
		cmd := call(ctx, via)
		if !o.again(ctx, cmd.Err(), pinned, tries, first) {
			return cmd
		}
	}
}

// SetNX sets the lock's key to the owner's token with the given lease if
// it is free (a native SET NX PX: a plain mutex's first attempt), on the
// pinned connection during a WithSyncReplicas attempt, sending it again as
// Run does a script that a Cluster refused while its slot moves. The
// caller holds the handle's mutex.
func (o *Owner) SetNX(ctx context.Context, lease time.Duration) (bool, error) {
	v := o.Token
	if o.Cfg.Metadata != "" {
		v += "|" + o.Cfg.Metadata // as the scripts' m_value (record.lua)
	}
	first := time.Now()
	for tries := 1; ; tries++ {
		ok, err := o.scripter().SetNX(ctx, o.Keys.Lock, v, lease).Result()
		if !o.again(ctx, err, o.conn != nil, tries, first) {
			return ok, err
		}
	}
}

// again looks at err, the outcome of a command's tries-th try since
// first: after a node out of reach it has a Cluster client reload its
// view (the node may have failed over); after a Cluster's refusal because
// the keys' slot is moving (shard.Unsettled), or a node it could not
// connect to (shard.Unreached: the command was not sent; after a
// failover, the view names the dead master until it is reloaded), it
// pauses and reports that the command should be sent again, while ctx
// allows and for at most shard.MaxUnsettled. A pinned connection (WithSyncReplicas) is one
// node's and cannot follow a slot: its refusals are returned, as are the
// last ones (the caller then takes the outcome as unknown: see
// IsRedisError).
func (o *Owner) again(ctx context.Context, err error, pinned bool, tries int, first time.Time) bool {
	shard.Refresh(o.E.RDB, err)
	return !pinned && (shard.Unsettled(o.E.RDB, err) || shard.Unreached(o.E.RDB, err)) && shard.Pause(ctx, tries, first) == nil
}

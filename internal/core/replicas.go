package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/shard"
)

// Replica acknowledgement (relock.WithSyncReplicas): after an acquire, the
// handle sends WAIT numreplicas timeout on the connection that sent the
// acquire, so that the lock is only used once that many replicas have it.
// Redis's WAIT counts the replicas that acknowledged every write the
// connection made so far; a script's writes are replicated as one unit.

// MaxSyncTimeout bounds WithSyncReplicas's timeout (WAIT blocks the
// connection, and the handle's lock calls, for up to that long).
const MaxSyncTimeout = time.Minute

// CheckSyncReplicas validates WithSyncReplicas's arguments.
func CheckSyncReplicas(n int, timeout time.Duration) error {
	switch {
	case n < 1:
		return fmt.Errorf("%w: sync replicas %d, want at least 1", lockerr.InvalidOption, n)
	case timeout < time.Millisecond || timeout > MaxSyncTimeout:
		return fmt.Errorf("%w: sync replicas timeout %v outside [1ms, %v]", lockerr.InvalidOption, timeout, MaxSyncTimeout)
	}
	return nil
}

// syncSupported says why rdb cannot serve WithSyncReplicas, or nil: WAIT
// must reach the connection (the node) that sent the acquire, which a
// Ring does not let a caller choose.
func syncSupported(rdb redis.UniversalClient) error {
	if _, ok := rdb.(*redis.Ring); ok {
		return fmt.Errorf("%w: WithSyncReplicas is not supported on a go-redis Ring", lockerr.InvalidOption)
	}
	return nil
}

// pin gives the handle one connection, to the node that serves its lock,
// until unpin: the acquire and its WAIT go over it.
func (o *Owner) pin(ctx context.Context) error {
	node, err := shard.Node(ctx, o.E.RDB, o.Keys.Lock)
	if errors.Is(err, shard.ErrNoNode) {
		return syncSupported(o.E.RDB)
	}
	if err != nil {
		return err
	}
	o.conn = node.Conn()
	return nil
}

func (o *Owner) unpin() {
	if o.conn != nil {
		_ = o.conn.Close()
		o.conn = nil
	}
}

// waitSlice is the longest WAIT a handle sends while its caller's ctx
// can be cancelled: WAIT cannot be interrupted, so a longer sync timeout
// is waited out in WAITs of this length, the ctx checked between them.
const waitSlice = 100 * time.Millisecond

// waitReplicas asks the pinned connection's node to wait for the
// replicas, for the sync timeout or what is left of ctx's deadline if that
// is sooner, and returns an error matching lockerr.NotReplicated when
// fewer than asked confirmed in time, or the caller's giving up (matching
// lockerr.NotObtained and ctx.Err()) when ctx ended first: within
// waitSlice of a cancellation, as a ctx that can be cancelled gets WAITs
// of at most that long (each counts the replicas that have every write of
// the connection so far, so repeating it asks the same question).
func (o *Owner) waitReplicas(ctx context.Context) error {
	n, t := o.Cfg.SyncReplicas, o.Cfg.SyncTimeout
	dl, hasDl := ctx.Deadline()
	cut := false // ctx's deadline comes before the sync timeout
	if hasDl {
		// WAIT is given no longer than the caller waits; WAIT 0 would
		// block for ever.
		left := time.Until(dl).Truncate(time.Millisecond)
		if left < time.Millisecond {
			return lockerr.GaveUp(context.DeadlineExceeded)
		}
		t, cut = min(t, left), left < t
	}
	end := time.Now().Add(t)
	for {
		ask := time.Until(end).Truncate(time.Millisecond)
		if ctx.Done() != nil {
			ask = min(ask, waitSlice)
		}
		ask = max(ask, time.Millisecond)
		sent := time.Now()
		got, err := o.conn.Wait(ctx, n, ask).Result()
		if err == nil && got >= int64(n) {
			return nil
		}
		if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
			return gerr
		}
		// A WAIT that answered well before its timeout with too few
		// replicas will answer so again (a server that cannot block
		// it): the answer stands.
		if err == nil && time.Since(sent) >= ask/2 && time.Until(end) >= time.Millisecond {
			continue
		}
		if cut && err == nil && time.Until(end) < time.Millisecond || hasDl && !time.Now().Before(dl) {
			// What was left of ctx's deadline ran out (go-redis's read
			// deadline may be ctx's: its read may time out a moment
			// before ctx reports it).
			return lockerr.GaveUp(context.DeadlineExceeded)
		}
		if err != nil {
			return fmt.Errorf("%w: WAIT: %w", lockerr.NotReplicated, err)
		}
		return fmt.Errorf("%w: %d of %d replicas confirmed within %v", lockerr.NotReplicated, got, n, t)
	}
}

// scripter is what the owner's commands go through: its pinned connection
// while it has one, else its Redis client.
func (o *Owner) scripter() interface {
	scripts.Caller
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
} {
	if o.conn != nil {
		return o.conn
	}
	return o.E.RDB
}

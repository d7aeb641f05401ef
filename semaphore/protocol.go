package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// protocol is what a handle sends to Redis: its permits are units of
// class core.Units, and the hold state machine (counts, watchdog hold,
// grants, lost replies) is core.Holder's.
type protocol struct {
	o       *core.Owner
	permits int
	keys    []string // the hash: the scripts build its other keys (see scripts.deriving)
	owners  string   // the owners' expiries
	queries []string // hash, owners, queue, timeouts
}

func newProtocol(o *core.Owner, permits int) *protocol {
	k := o.Keys
	owners := k.Sub("owners")
	return &protocol{
		o:       o,
		permits: permits,
		keys:    []string{k.Lock},
		owners:  owners,
		queries: []string{k.Lock, owners, k.Queue, k.Timeouts},
	}
}

func (p *protocol) Refuse(*core.Request) error { return nil }

// Grants: permits are granted to a handle while it waits.
func (p *protocol) Grants() bool { return true }

func (p *protocol) Records() bool { return true }

func (p *protocol) Acquire(ctx context.Context, r *core.Request) ([]int64, error) {
	o := p.o
	res, err := o.Run(ctx, scripts.SemAcquire, p.keys, append([]any{o.Token, r.Lease.Milliseconds(), r.ID,
		r.Held[core.Units], r.N, p.permits, r.WaitArgs(o.Heartbeat(), r.WaitID())}, o.Metadata()...)...).Int64Slice()
	return res, p.mismatch(err)
}

func (p *protocol) Release(ctx context.Context, r *core.Request) (int64, error) {
	o := p.o
	return o.Run(ctx, scripts.SemRelease, p.keys, o.Token, r.ID, r.N, r.Left()[core.Units], p.permits,
		r.Lease.Milliseconds(), r.RecordTTL(), r.KeptRecord()).Int64()
}

func (p *protocol) Abort(ctx context.Context, r *core.Request) error {
	o := p.o
	return o.Run(ctx, scripts.SemAbort, p.keys, o.Token, r.ID, r.RecordTTL(),
		r.Held[core.Units], p.permits).Err()
}

func (p *protocol) Leave(ctx context.Context, r *core.Request) error {
	o := p.o
	return o.Run(ctx, scripts.SemLeave, p.keys, o.Token, r.WaitID(), r.Held[core.Units],
		r.Claim.Milliseconds(), r.N, p.permits, o.Cfg.Metadata).Err()
}

// capacityPrefix starts the error reply of a script that found the
// semaphore in use with another capacity.
const capacityPrefix = "RELOCK_CAPACITY "

// capacityError is a capacity mismatch reported by a script: it matches
// lockerr.CapacityMismatch, and stays a Redis error reply (the request
// was refused at Redis, so there is nothing to undo).
type capacityError struct {
	mine, theirs int
	reply        error
}

func (e capacityError) Error() string {
	return fmt.Sprintf("%v: this handle has %d permits, the semaphore is in use with %d",
		lockerr.CapacityMismatch, e.mine, e.theirs)
}

func (e capacityError) Unwrap() []error { return []error{lockerr.CapacityMismatch, e.reply} }

// mismatch turns a script's capacity error reply into a capacityError.
func (p *protocol) mismatch(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), capacityPrefix) {
		return err
	}
	theirs := 0
	if f := strings.Fields(strings.TrimPrefix(rerr.Error(), capacityPrefix)); len(f) > 0 {
		theirs, _ = strconv.Atoi(f[0])
	}
	return capacityError{mine: p.permits, theirs: theirs, reply: err}
}

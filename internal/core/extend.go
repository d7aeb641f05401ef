package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Extend sets the remaining lease of the handle's current hold to d (op
// names the call in errors), in one script call that checks that this
// owner still holds the lock and never recreates it:
//
//   - a hold with a fixed lease (WithLease, LockFor) gets d as its lease:
//     its TTL at Redis becomes d (longer or shorter than before), its local
//     deadline d from now, and later re-entries and partial releases reset
//     it to d;
//   - a hold the watchdog renews is renewed now: it has at least d left,
//     and the watchdog keeps renewing it to max(d, its timeout) from then
//     on (at its usual period), so d is the most a pause of this process
//     can last without losing it.
//
// When the handle holds nothing it returns an error matching
// lockerr.NotHeld (with the cause when its hold was lost) and sends
// nothing; past the hold's local deadline it declares the hold lost, as
// Held does, and returns that loss (lockerr.Expired) without asking
// Redis, where the key may have expired and been taken. When Redis no
// longer has the hold as this owner's, the hold is lost (Lost fires) and
// the error matches lockerr.NotHeld and lockerr.Gone; nothing of another
// owner's is touched. The lease is set absolutely, so a copy that runs
// twice (go-redis's resend after a lost reply) leaves the same lease.
// When the reply is lost, the error says so and the local deadline is the
// earlier of the old one and the new lease: Redis may or may not have
// applied it. WithSyncReplicas, when the replicas do not confirm in time
// (lockerr.NotReplicated) or ctx ends first (its error), the extension
// stands at the master only: the local deadline stays (a shorter fixed
// lease counts from now on), so the hold is declared lost no later than
// Redis's lease says; a hold declared lost at that deadline leaves a
// longer lease's key at Redis, which no owed Unlock releases, until it
// runs out. When the reply (or the replicas' answer) comes after the hold
// was declared lost (its local deadline passed meanwhile), the error is
// the loss, and what Redis extended is given back, unless the Client was
// closed: its holds stay at Redis for their lease, for another process to
// Resume.
func (h *Holder) Extend(ctx context.Context, op string, d time.Duration) error {
	if err := h.Check(); err != nil {
		return h.errorf(op, err)
	}
	if err := CheckLease("lease", d); err != nil {
		return h.errorf(op, err)
	}
	h.mu.Lock()
	defer h.unlock()
	if h.Cfg.SyncReplicas > 0 {
		if err := h.pin(ctx); err != nil {
			return h.errorf(op, err)
		}
		defer h.unpin()
	}
	h.syncLostLocked()
	if err := h.settleLocked(ctx); err != nil {
		return err
	}
	h.goneLocked() // past the local deadline: lost, as Held says (nothing is sent)
	switch {
	case h.lost != nil:
		return h.errorf(op, h.lost)
	case h.held.Zero() || h.hold == nil:
		return h.errorf(op, lockerr.NotHeld)
	case h.ending:
		return h.errorf(op, fmt.Errorf("%w: its Unlock was called (and could not be confirmed)", lockerr.NotHeld))
	}
	lease, exact := d, true
	if h.watched {
		lease, exact = max(d, h.lease), false
	}
	keys, args := watchdog.ExtendCall(h.hold, lease, exact, h.held.Sum())
	start := time.Now()
	h.sent++
	res, err := h.Run(ctx, scripts.Renew, keys, args...).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		if exact {
			// It may have run: a shorter lease counts from now on.
			h.E.WD.Cap(h.hold, start.Add(lease-watchdog.Drift(lease)))
		}
		return h.errorf(op, err)
	}
	if res[0] == 0 {
		cause := h.loseLocked(lockerr.Loss(lockerr.Gone, "lock gone, expired or taken by another owner"))
		return h.errorf(op, cause)
	}
	if h.Cfg.SyncReplicas > 0 {
		if err := h.waitReplicas(ctx); err != nil {
			// Extended at the master only. The deadline stays, but a
			// shorter fixed lease counts from now on, as Redis has it.
			if exact {
				h.E.WD.Cap(h.hold, start.Add(lease-watchdog.Drift(lease)))
			}
			if errors.Is(err, lockerr.NotObtained) {
				// The caller gave up waiting for the replicas (its
				// ctx's error): not a lock not obtained.
				cause := ctx.Err()
				if cause == nil {
					cause = context.DeadlineExceeded // read a moment before ctx's deadline
				}
				err = fmt.Errorf("extended at the master, its replicas not awaited: %w", cause)
			}
			if lost := h.lostWhileExtendingLocked(ctx); lost != nil {
				return h.errorf(op, lost)
			}
			return h.errorf(op, err)
		}
	}
	h.lease = lease
	if h.E.WD.Extend(h.hold, start, lease) {
		// The Client was closed meanwhile: its holds stay at Redis for
		// their lease, for another process to Resume (see WithToken).
		h.lostLocked(lockerr.ClosedLoss)
		return h.errorf(op, lockerr.ClosedLoss)
	}
	if err := h.lostWhileExtendingLocked(ctx); err != nil {
		return h.errorf(op, err)
	}
	return nil
}

// lostWhileExtendingLocked returns the loss the watchdog declared (the
// hold's local deadline passed) while an Extend that Redis applied was in
// flight, or nil. The lock has the new lease there, and a handle that
// reported the loss never releases it (its owed Unlock sends nothing): it
// is given back, unless the Client was closed (its holds stay at Redis
// for their lease, for another process to Resume).
func (h *Holder) lostWhileExtendingLocked(ctx context.Context) error {
	err := h.E.WD.Err(h.hold)
	if err == nil {
		return nil
	}
	if !errors.Is(err, lockerr.Closed) {
		h.giveBackLocked(ctx)
	}
	h.forgetLocked(err)
	return err
}

// giveBackLocked deletes at Redis what this owner holds there, for a hold
// the handle has declared lost although Redis may still keep it as the
// owner's (an Extend applied after the local deadline passed): the abort
// of an acquire made from no holds, which drops every hold of the owner
// and passes the lock on, detached from ctx (see Detach). If it fails, the
// hold ends with its lease at Redis.
func (h *Holder) giveBackLocked(ctx context.Context) {
	// Not over a pinned connection (WithSyncReplicas): it cannot follow a
	// moving slot, and a refusal would go unanswered.
	h.unpin()
	class := Units
	if h.held[Write] > 0 {
		class = Write
	}
	r := &Request{ID: h.NextRequest(), Class: class, N: h.held[class], Lease: h.lease, GiveBack: true}
	cctx := Detach(ctx)
	h.sent++
	_ = h.proto.Abort(cctx, r)
}

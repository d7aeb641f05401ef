package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/watchdog"
)

// call is one acquire call of a handle: its attempts, and for a blocking
// call its wait id and the grants pushed to it.
type call struct {
	h     *Holder
	ctx   context.Context // the caller's: for Granted (a blocking call), and events
	op    string          // names the call in errors
	class Class
	n     int
	lease time.Duration // asked for this call (LockFor...); 0: the handle's
	block bool
	begin time.Time
	first bool
	wait  string // wait id, made on first use (blocking calls only)
	tries int    // attempts sent to Redis (for events)
	// The latest refused attempt: when it was sent (a grant to this call
	// came later), the server's time when it was refused (a grant older
	// than that is stale) and the handle's request count after it (another
	// request since may have undone the grant).
	asked     time.Time
	refusedUs int64
	sent      uint64
	// The context of the call's clean-up once it gave up (see cleanup).
	clean context.Context
}

// cleanup returns the context of everything the call undoes once it gave
// up (the abort of an attempt whose outcome is unknown or that was granted
// too late, leaving its queue): detached from ctx (see Detach), made on
// first use, so that all of it fits in one ReleaseTimeout window however
// often it is resent (a Cluster refuses it while the slot moves).
func (c *call) cleanup(ctx context.Context) context.Context {
	if c.clean == nil {
		c.clean = Detach(ctx)
	}
	return c.clean
}

// Wait acquires n units of class, waiting on spec's channel until granted
// or ctx ends; op names the call in errors. lease, if > 0, is the lease
// the call asks for (see call.request); 0 is the handle's.
func (h *Holder) Wait(ctx context.Context, op string, class Class, n int, lease time.Duration, spec WaitSpec) error {
	c := &call{h: h, ctx: ctx, op: op, class: class, n: n, lease: lease, block: true, begin: time.Now(), first: true}
	err := h.E.Wait(ctx, spec, c)
	if lockerr.BareGiveUp(err) {
		err = h.errorf(op, err) // `mutex: lock "orders:42": relock: lock not obtained: ...`
	}
	h.failed(ctx, err, c)
	return err
}

// Try makes one attempt to acquire n units of class, with lease as Wait.
func (h *Holder) Try(ctx context.Context, op string, class Class, n int, lease time.Duration) (bool, error) {
	c := &call{h: h, ctx: ctx, op: op, class: class, n: n, lease: lease, begin: time.Now(), first: true}
	ok, _, err := c.Attempt(ctx)
	if lockerr.BareGiveUp(err) {
		err = h.errorf(op, err)
	}
	h.failed(ctx, err, c)
	return ok, err
}

// failed reports acquire call c, with ctx, that returned err, if it did.
func (h *Holder) failed(ctx context.Context, err error, c *call) {
	if err != nil && h.E.Observing() {
		ev := h.event(EventFailed, c.class, err)
		ev.Wait, ev.Attempts, ev.Ctx = time.Since(c.begin), c.tries, ctx
		h.E.Emit(ev)
	}
}

// waitID returns the call's wait id, made on first use: 64 random bits,
// so that a grant pushed to an earlier call of the same handle (delayed on
// the pub/sub connection) is never taken for one to this call.
func (c *call) waitID() string {
	if c.wait == "" && c.block {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.wait = hex.EncodeToString(b[:])
	}
	return c.wait
}

func (c *call) request() *Request {
	h := c.h
	r := &Request{Class: c.class, N: c.n, Held: h.held, Block: c.block, First: c.first, call: c}
	switch {
	case h.held.Zero() && c.lease > 0:
		// A new hold with a lease of its own: fixed, never renewed.
		r.Lease = c.lease
	case h.held.Zero():
		r.Lease, r.Watched = h.Lease(), h.Watched()
	case c.lease == 0:
		r.Lease, r.Watched = h.lease, h.watched
	case h.watched:
		// A re-entry with a lease of a hold the watchdog renews: as
		// Extend, at least that lease from now on.
		r.Lease, r.Watched = max(c.lease, h.lease), true
	default:
		r.Lease = c.lease
	}
	if h.proto.Grants() {
		r.Claim = min(r.Lease, h.Heartbeat()/2)
	}
	return r
}

// Attempt is one acquire attempt (Waiter).
func (c *call) Attempt(ctx context.Context) (bool, time.Duration, error) {
	h := c.h
	if err := h.lockSettled(ctx); err != nil {
		return false, 0, err
	}
	defer h.unlock()
	if h.Cfg.SyncReplicas > 0 {
		// The acquire and its WAIT go over one connection.
		if err := h.pin(ctx); err != nil {
			return false, 0, h.errorf(c.op, err)
		}
		defer h.unpin()
	}
	h.syncLostLocked()
	if err := h.settleLocked(ctx); err != nil {
		return false, 0, err
	}
	if h.goneLocked() { // past the local deadline: lost (see Held), nothing is sent
		return false, 0, h.errorf(c.op, fmt.Errorf("%w; unlock it before locking again", h.lost))
	}
	r := c.request()
	c.first = false
	if err := h.proto.Refuse(r); err != nil {
		return false, 0, h.errorf(c.op, err)
	}
	if err := lockerr.CtxGaveUp(ctx); err != nil {
		return false, 0, err
	}
	r.ID = h.NextRequest()
	start := time.Now()
	h.sent++
	c.tries++
	res, err := h.proto.Acquire(ctx, r)
	if err == nil && len(res) != 2 && len(res) != 3 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		if !IsRedisError(err) {
			h.undoLocked(ctx, r, start)
		}
		if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
			return false, 0, gerr
		}
		return false, 0, h.errorf(c.op, err)
	}
	if res[0] == 1 {
		if !h.held.Zero() && h.goneLocked() {
			// A re-entry granted after the hold it adds to was declared
			// lost (its local deadline passed while the reply was on its
			// way): Redis has the owner's hold again, with a full lease,
			// which no owed Unlock would release. Give it all back; but a
			// closed Client's holds stay at Redis for their lease, for
			// another process to Resume: undo only this re-entry.
			if errors.Is(h.lost, lockerr.Closed) {
				h.abortLocked(ctx, r)
				return false, 0, h.errorf(c.op, h.lost)
			}
			if len(res) == 3 && res[2] == 1 && h.proto.Records() {
				h.E.Records.Done(r.Record(&h.Owner), start) // its reply came: no resend
			}
			h.giveBackLocked(ctx)
			return false, 0, h.errorf(c.op, h.lost)
		}
		if gerr := c.gaveUp(ctx); gerr != nil {
			// Granted after the caller's ctx ended (go-redis does not
			// interrupt a command on ctx end unless told to) or the
			// client closed: give it back, as x/sync's semaphore does.
			h.undoLocked(ctx, r, start)
			return false, 0, gerr
		}
		if h.Cfg.SyncReplicas > 0 {
			if err := h.waitReplicas(ctx); err != nil {
				// Not safe against a failover yet: given back at once.
				h.undoLocked(ctx, r, start)
				return false, 0, h.errorf(c.op, err)
			}
		}
		h.grantedLocked(r, c, start, res[1], 0)
		if len(res) == 3 && res[2] == 1 && h.proto.Records() {
			h.E.Records.Done(r.Record(&h.Owner), start)
		}
		return true, 0, nil
	}
	switch res[1] {
	case ReplyAborted:
		return false, 0, h.errorf(c.op, fmt.Errorf("request %s was aborted", r.ID))
	case ReplyLostHold:
		cause := h.loseLocked(lockerr.Loss(lockerr.Gone, "re-entry refused: this handle's earlier hold is gone"))
		return false, 0, h.errorf(c.op, cause)
	case ReplyUpgrade:
		return false, 0, h.errorf(c.op, fmt.Errorf("%w: this handle holds read holds only", lockerr.Upgrade))
	}
	c.asked, c.sent, c.refusedUs = start, h.sent, 0
	if len(res) == 3 {
		c.refusedUs = res[2]
	}
	return false, time.Duration(res[1]) * time.Millisecond, nil
}

// lockSettled locks h.mu once no renewal of the handle's last hold is in
// flight, if the handle holds nothing (an attempt at a new hold; a
// re-entry's hold is the one renewed): one sent before that hold's
// release could otherwise run after the new hold's acquire and give it
// the watchdog's lease (watchdog.Settle). It checks again each time it
// has the lock, as another goroutine's release may end a hold meanwhile.
// If ctx ends first it returns an error matching lockerr.NotObtained and
// ctx.Err(), without h.mu.
func (h *Holder) lockSettled(ctx context.Context) error {
	h.mu.Lock()
	for h.held.Zero() && h.last != nil && h.last.Flying() {
		last := h.last
		h.mu.Unlock()
		if err := h.E.WD.Settle(ctx, last); err != nil {
			return lockerr.GaveUp(err) // ctx's error
		}
		h.mu.Lock()
	}
	return nil
}

// gaveUp returns why a grant must not be taken: the caller's ctx ended or
// the client closed (an error matching lockerr.NotObtained), or nil.
func (c *call) gaveUp(ctx context.Context) error {
	gerr := lockerr.CtxGaveUp(ctx)
	if gerr == nil && errors.Is(c.h.E.Usable(), lockerr.Closed) {
		gerr = lockerr.GaveUp(lockerr.Closed)
	}
	return gerr
}

// Addr is the call's address for grants (Waiter): its wait id, when its
// lock type grants.
func (c *call) Addr() string {
	if !c.h.proto.Grants() {
		return ""
	}
	return c.waitID()
}

// Granted takes a grant pushed to this call (Waiter).
func (c *call) Granted(data string) bool { return c.accept(c.ctx, data) }

// accept takes a grant pushed to this call (data: "<fence>|<server us>")
// and reports whether it did. It trusts the push only when nothing can
// have happened to the grant since: the grant is newer than the call's
// latest refusal at Redis (else it is a stale one, since given up or
// expired), no other request of the handle was sent since that refusal
// (another call's Leave or Abort may have undone it), the call's claim
// lease, counted from when that refused attempt was sent (the grant came
// later), has time left, the caller still waits and the handle holds
// nothing. Otherwise the grant is left to the next attempt, which finds it
// at Redis if it is still this owner's (or to Leave, which passes it on).
func (c *call) accept(ctx context.Context, data string) bool {
	h := c.h
	h.mu.Lock()
	defer h.unlock()
	f, u, _ := strings.Cut(data, "|")
	fence, ferr := strconv.ParseInt(f, 10, 64)
	us, uerr := strconv.ParseInt(u, 10, 64)
	r := c.request()
	claim := r.Claim
	// With WithSyncReplicas a grant is taken only by an attempt, which
	// waits for the replicas on its own connection.
	if ferr != nil || uerr != nil || us <= c.refusedUs || c.asked.IsZero() || h.sent != c.sent || h.Cfg.SyncReplicas > 0 ||
		c.gaveUp(ctx) != nil || h.lost != nil || !h.held.Zero() ||
		claim == 0 || time.Since(c.asked) >= claim-watchdog.Drift(claim) {
		return false
	}
	h.grantedLocked(r, c, c.asked, fence, claim)
	return true
}

// Leave withdraws the call from its lock's queue when it gives up
// (Waiter), within the clean-up window of the call (see cleanup): an
// abort the call sent before counts against the same window.
func (c *call) Leave(ctx context.Context) error {
	h := c.h
	h.mu.Lock()
	defer h.unlock()
	if c.wait == "" || c.tries == 0 {
		return nil // no attempt sent: never queued (a wait that joined a subscription has its id before)
	}
	h.sent++
	return h.proto.Leave(c.cleanup(ctx), c.request())
}

// grantedLocked counts a grant of acquire r, sent at start by a call that
// began at begin. A grant pushed by a release (claim > 0) lasts claim from
// start until the watchdog claims it.
func (h *Holder) grantedLocked(r *Request, c *call, start time.Time, fence int64, claim time.Duration) {
	if h.held.Zero() {
		h.beginLocked(r.Class, r.Watched, c.begin, c, claim > 0)
	}
	if h.held[r.Class] == 0 {
		h.fence[r.Class] = fence
	}
	h.held[r.Class] += r.N
	h.lease, h.ending = r.Lease, false
	h.needLocked(h.held)
	var lost bool
	switch {
	case claim > 0:
		lost = h.E.WD.Claim(h.hold, start, claim, h.lease, h.watched)
	case h.setsLease(r):
		// The local deadline follows the lease the re-entry set exactly
		// (Add would only ever move it later, and a shorter lease would
		// run out at Redis while the handle still counted on the old
		// one).
		lost = h.E.WD.Extend(h.hold, start, h.lease)
	default:
		// A new grant set the lease to its full length; so did a
		// re-entry of a watched hold, or a semaphore's, whose permits
		// keep a longer lease they had (sem_live).
		lost = h.E.WD.Add(h.hold, start, h.lease, h.watched)
	}
	if lost {
		h.lostLocked(lockerr.ClosedLoss)
	}
}

// setsLease reports whether acquire r is a re-entry of a hold with a fixed
// lease that sets that lease at Redis to r.Lease, shorter or longer, as
// Extend does: every lock type's but a semaphore's, whose permits keep a
// longer lease they have (sem_live).
func (h *Holder) setsLease(r *Request) bool {
	return !r.Held.Zero() && !r.Watched && h.watchKind != watchdog.KindSemaphore
}

// undoLocked gives back acquire r, sent at start, that may have run at
// Redis but is not counted (its outcome unknown, or its grant refused):
// it is aborted there. An abort undoes a re-entry's count, not the lease
// it set: a re-entry that sets the lease (setsLease) may have shortened
// it, so the hold's local deadline is capped at what that lease allows.
func (h *Holder) undoLocked(ctx context.Context, r *Request, start time.Time) {
	if h.setsLease(r) {
		h.E.WD.Cap(h.hold, start.Add(r.Lease-watchdog.Drift(r.Lease)))
	}
	h.abortLocked(ctx, r)
}

// beginLocked begins a new hold of the handle, whose acquire call c (nil:
// a Resume) began at begin, granted by a release (pushed) or not: its
// watchdog hold (not yet watched), its scope, its events.
func (h *Holder) beginLocked(class Class, watched bool, begin time.Time, c *call, pushed bool) {
	h.hold = watchdog.NewHold(h.Keys.Lock, h.watchKind, h.Token)
	h.hold.Aux, h.hold.Absent = h.watchAux, h.Owner.Absent()
	h.hold.Replicas, h.hold.ReplicaWait = h.Cfg.SyncReplicas, h.Cfg.SyncTimeout
	h.last = h.hold
	h.since = time.Now()
	h.watched = watched
	scope := NewScope()
	h.scope = scope
	// A loss the watchdog declares ends the hold's contexts at once,
	// as Lost fires.
	h.hold.OnEnd = func(cause error) { scope.End(cause) }
	if h.E.Observing() {
		ev := h.event(EventAcquired, class, nil)
		ev.Wait, ev.Granted = h.since.Sub(begin), pushed
		if c != nil {
			ev.Attempts, ev.Ctx = c.tries, c.ctx
		}
		h.outbox = append(h.outbox, ev)
		lost := h.event(EventLost, class, nil)
		lost.Mode = ""
		since := h.since
		h.hold.OnLost = func(cause error) {
			ev := lost
			ev.Held, ev.Err = time.Since(since), cause
			h.E.Emit(ev)
		}
	}
}

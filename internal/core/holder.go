package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Class is a kind of unit a handle holds: the exclusive locks use one
// class (Units), the read/write lock two (Read and Write).
type Class int

// Classes of units.
const (
	Units Class = 0 // the one class of exclusive locks
	Read  Class = 0 // read holds of a read/write lock
	Write Class = 1 // write holds of a read/write lock
)

// classes is the number of classes a Holder tracks.
const classes = 2

// Counts are a handle's units, per class.
type Counts [classes]int

// Zero reports whether no unit of any class is counted.
func (c Counts) Zero() bool { return c == Counts{} }

// Sum is the units of all classes.
func (c Counts) Sum() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Request is one acquire or release, as a Protocol sends it to Redis.
type Request struct {
	ID    string // request id, unique per owner (for the idempotency record)
	Class Class  // the class of units asked for or given back
	N     int    // how many units
	Held  Counts // the handle's units before the request
	Block bool   // acquire: the caller waits if refused (may queue)
	First bool   // acquire: the first attempt of its acquire call
	// Lease is what the request sets the hold's lease to (an acquire, a
	// partial release); Watched, whether the watchdog renews the hold
	// (decided by the acquire that begins it). Claim is the lease of a
	// grant pushed to this acquire call (0 for a lock type that never
	// grants): a fraction of the heartbeat, at most Lease.
	Lease   time.Duration
	Watched bool
	Claim   time.Duration
	// GiveBack marks the abort (Protocol.Abort) of a hold the handle has
	// declared lost while Redis may keep it (see Holder.giveBackLocked):
	// it drops whatever the owner holds, whatever the request id.
	GiveBack bool

	call  *call  // the acquire call, for WaitID
	op    string // a release's operation, for errors when it is resent
	sends int    // how many times it was sent (a release may be resent)
}

// WaitID identifies a blocking acquire call (all its attempts, its queue
// entry and the grants addressed to it): 16 hex digits, random, made on
// first use. It is empty for a one-shot acquire (which never queues) and a
// release.
func (r *Request) WaitID() string {
	if r.call == nil {
		return ""
	}
	return r.call.waitID()
}

// Left is what the handle keeps after release r.
func (r *Request) Left() Counts {
	left := r.Held
	left[r.Class] -= r.N
	return left
}

// Final reports whether release r gives back the handle's last unit.
func (r *Request) Final() bool { return r.Left().Zero() }

// RecordTTL is how long the request's record is kept, in milliseconds:
// long enough to cover go-redis's resends of the request, and no longer
// than its lease, so nothing outlives the lock by more than one lease (see
// MaxRecordTTL).
func (r *Request) RecordTTL() int64 { return min(r.Lease, MaxRecordTTL).Milliseconds() }

// MaxKeptRecord is the longest lease whose final release keeps its record
// as long as the lease had left (the lock itself, renamed, is the record:
// see record.lua's release_record); a longer lease's record lasts
// RecordTTL. A watched hold's lease left is at least two thirds of the
// watchdog timeout (30 s by default) while it is renewed; a fixed lease
// may be nearly over, and sets the record's TTL too.
const MaxKeptRecord = 30 * time.Second

// KeptRecord is what a final release sends for its record's TTL: "" to
// keep the lease left (a watched hold of at most MaxKeptRecord), else
// RecordTTL in milliseconds, which costs the release one call more.
func (r *Request) KeptRecord() string {
	if r.Watched && r.Lease <= MaxKeptRecord {
		return ""
	}
	return strconv.FormatInt(r.RecordTTL(), 10)
}

// WaitArgs is what acquire r sends for the case that it is refused, in
// one argument (see queue.lua's q_args): whether it blocks, the waiter's
// heartbeat timeout hb, its wait id (r.WaitID(), or ” for a caller that
// never queues), its claim lease and its record TTL.
func (r *Request) WaitArgs(hb time.Duration, wait string) string {
	block := "0"
	if r.Block {
		block = "1"
	}
	return block + "|" + strconv.FormatInt(hb.Milliseconds(), 10) + "|" + wait + "|" +
		strconv.FormatInt(r.Claim.Milliseconds(), 10) + "|" + strconv.FormatInt(r.RecordTTL(), 10)
}

// Record is the key of request r's record (scripts.RequestRecord), for
// the owner o with the lock's main key.
func (r *Request) Record(o *Owner) string { return scripts.RequestRecord(o.Keys.Lock, o.Token, r.ID) }

// Protocol is what a lock type sends to Redis for one handle: its scripts
// and their arguments. Replies follow one convention across lock types.
type Protocol interface {
	// Refuse returns why acquire r must be refused without asking Redis
	// (lockerr.AlreadyHeld on a held mutex, lockerr.Upgrade), or nil.
	Refuse(r *Request) error
	// Acquire makes one acquire attempt. Its reply is {1, fence} when
	// granted (fence 0 without a fencing token), {0, ms} or {0, ms, us}
	// when refused (retry once ms have passed: the holder's remaining
	// lease, 0 in its last millisecond, -1: unknown; us: the server's
	// time of the refusal in microseconds, for a lock type that grants),
	// or {0, code} with code ReplyAborted, ReplyLostHold or ReplyUpgrade.
	Acquire(ctx context.Context, r *Request) ([]int64, error)
	// Release gives back r.N units of r.Class: 1 when released (now or
	// by an earlier run of the same request), 0 when the owner holds no
	// such unit at Redis (nothing changed).
	Release(ctx context.Context, r *Request) (int64, error)
	// Abort undoes acquire r, whose outcome is unknown or whose grant came
	// after its caller gave up, and withdraws the owner from any queue.
	Abort(ctx context.Context, r *Request) error
	// Leave withdraws the blocking call r.Wait, which gave up, from its
	// queue; a grant made to it that the handle did not take (r.Held says
	// what the handle holds) is passed on to the next waiter.
	Leave(ctx context.Context, r *Request) error
	// Grants reports whether a release may grant the lock to this handle
	// while it waits (with the call's claim lease, Request.Claim, which
	// its first renewal turns into the full lease).
	Grants() bool
	// Records reports whether the scripts keep one record per request
	// (scripts.RequestRecord), which the Sweeper deletes once the
	// handle has the reply: of every release, and of an acquire whose
	// grant reply says it wrote one ({1, fence, 1}).
	Records() bool
}

// Refusal codes in the second element of an acquire reply.
const (
	ReplyAborted  = -3 // the request was aborted by its sender
	ReplyLostHold = -4 // re-entry refused: the owner's earlier holds are gone
	ReplyUpgrade  = -5 // write refused: the owner holds only reads
)

// Holder is the hold state machine of one handle, whatever its lock type:
// how many units of each class the handle holds by its own count, the
// watchdog hold that keeps them alive, a release whose outcome is unknown,
// and what happened when the holds were lost. Every acquire or release is
// one Protocol call made under the handle's mutex (never held while
// waiting). Its methods are safe for concurrent use.
//
// After a loss the handle's counts stay as they were: they are the unlocks
// the caller still owes. Until it has paid them (each owed unlock returns
// an error matching lockerr.NotHeld, with the cause), every acquire is
// refused with lockerr.NotHeld, so a nested Lock inside a critical section
// whose hold is gone can never start a fresh hold unnoticed.
type Holder struct {
	Owner
	proto     Protocol
	watchKind string
	watchAux  string          // a second key the watchdog renews (rwlock owners)
	modes     [classes]string // Event.Mode of each class

	mu      sync.Mutex
	held    Counts
	lease   time.Duration  // of the current hold (see Request.Lease)
	watched bool           // the current hold is renewed by the watchdog
	ending  bool           // its final release was sent, not confirmed: no longer renewed
	fence   [classes]int64 // fencing token of the hold of each class
	hold    *watchdog.Hold // while the handle holds anything not lost
	last    *watchdog.Hold // the most recent hold, for Lost and LostErr
	scope   *Scope         // the contexts of the most recent hold (HoldContext)
	lost    error          // why the counted holds were lost; nil when not
	pending *Request       // a release whose outcome is unknown
	sent    uint64         // requests sent to Redis by any call of the handle
	since   time.Time      // when the current hold began
	outbox  []Event        // events to emit once mu is released (observed only)
}

// NewHolder returns the state machine of a handle of owner o, speaking p.
// watchKind is how the watchdog renews its holds (watchdog.KindString...);
// modes name the classes in events ("read", "write"), if they need names.
func NewHolder(o Owner, p Protocol, watchKind string, modes ...string) *Holder {
	h := &Holder{Owner: o, proto: p, watchKind: watchKind}
	copy(h.modes[:], modes)
	return h
}

// Speak sets the handle's protocol, and the second key its watchdog renews
// (if any), for a lock type whose protocol needs the Holder's Owner to
// exist first. It must be called before the handle is used.
func (h *Holder) Speak(p Protocol, watchAux string) {
	h.proto, h.watchAux = p, watchAux
}

// unlock releases h.mu, then emits the events queued meanwhile: observers
// run without the handle's lock, so they may call its methods.
func (h *Holder) unlock() {
	out := h.outbox
	h.outbox = nil
	h.mu.Unlock()
	for _, ev := range out {
		h.E.Emit(ev)
	}
}

// event returns an event of this handle.
func (h *Holder) event(t EventType, class Class, err error) Event {
	return Event{Type: t, Kind: h.Kind, Name: h.Name, Mode: h.modes[class], Owner: Fingerprint(h.Token), Err: err}
}

// abortLocked undoes acquire r, whose outcome is unknown, so that a hold
// obtained after the caller gave up does not stay behind. If the abort
// fails too, what it could not undo is not watched and expires within one
// lease.
func (h *Holder) abortLocked(ctx context.Context, r *Request) {
	// Not over a pinned connection (WithSyncReplicas): after a network
	// error or a WAIT that timed out it may be broken; the pool's are not.
	h.unpin()
	h.sent++
	_ = h.proto.Abort(r.call.cleanup(ctx), r)
}

// needLocked tells the watchdog how many units the owner must have in
// Redis for a renewal to extend its hold: for a semaphore, the permits it
// counts (see watchdog.SetNeed); other lock types renew any hold of the
// owner.
func (h *Holder) needLocked(c Counts) {
	if h.watchKind == watchdog.KindSemaphore {
		h.E.WD.SetNeed(h.hold, c.Sum())
	}
}

// syncLostLocked takes note of a loss that the watchdog has declared.
func (h *Holder) syncLostLocked() {
	if h.hold == nil {
		return
	}
	if err := h.E.WD.Err(h.hold); err != nil {
		h.forgetLocked(err)
	}
}

// loseLocked declares the current holds lost because of cause, learned
// from Redis by this handle, and returns the loss that stands: if the
// watchdog has declared them lost meanwhile, its cause (and the report is
// its own), so that the caller's error and LostErr agree.
func (h *Holder) loseLocked(cause error) error {
	if h.hold != nil {
		if h.E.WD.Lose(h.hold, cause) {
			h.lostLocked(cause)
			return cause
		}
		if err := h.E.WD.Err(h.hold); err != nil {
			h.forgetLocked(err)
			return err
		}
	}
	h.markLostLocked(cause)
	return cause
}

// LoseIf declares the handle's current hold lost because of cause, as
// Extend does when Redis no longer has it, if that hold is still the one
// whose fencing token of class is fence: a call of a lock type that found
// the hold gone at Redis (an election's Proclaim) may have raced with its
// release and a new acquire. It sends nothing.
func (h *Holder) LoseIf(class Class, fence int64, cause error) {
	h.mu.Lock()
	defer h.unlock()
	h.syncLostLocked()
	if h.lost != nil || h.hold == nil || h.ending || h.held[class] == 0 || h.fence[class] != fence {
		return
	}
	h.loseLocked(cause)
}

// lostLocked takes note of a loss that the watchdog declared for this
// handle without telling it (see watchdog.Lose): the event is the
// handle's to report.
func (h *Holder) lostLocked(cause error) {
	if h.E.Observing() {
		ev := h.event(EventLost, Units, cause)
		ev.Mode, ev.Held = "", time.Since(h.since)
		h.outbox = append(h.outbox, ev)
	}
	h.markLostLocked(cause)
}

// markLostLocked forgets the lost watchdog hold, ends the hold's
// contexts, and keeps the counts as unlocks owed (see forgetLocked). For
// a loss this handle declared: Lost has fired.
func (h *Holder) markLostLocked(cause error) {
	h.scope.End(cause)
	h.forgetLocked(cause)
}

// forgetLocked is markLostLocked for a loss the watchdog declared: the
// hold's contexts are its to end (OnEnd), right after Lost fires, which
// may not have happened yet. A final release whose reply was lost stays
// pending: that release may be what ended the hold (the lock found gone,
// or its lease run out after the unconfirmed release), and the next
// Unlock resends it to find out (see releaseLocked).
func (h *Holder) forgetLocked(cause error) {
	h.hold = nil
	if p := h.pending; p == nil || !p.Final() {
		h.pending = nil
	}
	if h.held.Zero() {
		h.lost = nil
		return
	}
	h.lost = cause
}

// settleLocked resends a release whose outcome is unknown, with its
// request id, before the handle sends anything else: the record that makes
// the resend idempotent only remembers the handle's latest request.
func (h *Holder) settleLocked(ctx context.Context) error {
	if h.pending == nil {
		return nil
	}
	if err := h.releaseLocked(ctx, h.pending.op, h.pending.Class, h.pending.N); err != nil && !errors.Is(err, lockerr.NotHeld) {
		return err
	}
	return nil
}

// Release gives back n units of class (op names the call in errors).
// Without them it returns an error matching lockerr.NotHeld and changes
// nothing. A release whose reply was lost is resent, with the same request
// id, by the handle's next call: it is applied once.
//
// The release is not cancelled by ctx: it is sent and its reply awaited
// even when ctx has ended (an HTTP handler's ctx ends when its client goes
// away), for at most ReleaseTimeout (see Detach). A final release stops
// the renewals of the hold before it is sent, whatever its outcome: one
// that cannot be confirmed ends the hold at its lease at worst.
func (h *Holder) Release(ctx context.Context, op string, class Class, n int) error {
	// A closed client still lets an unlock report the loss of its holds.
	if err := h.Check(); err != nil && !errors.Is(err, lockerr.Closed) {
		return h.errorf(op, err)
	}
	ctx = Detach(ctx)
	h.mu.Lock()
	defer h.unlock()
	h.syncLostLocked()
	if p := h.pending; p != nil && (p.Class != class || p.N != n) {
		if err := h.settleLocked(ctx); err != nil {
			return err
		}
	}
	return h.releaseLocked(ctx, op, class, n)
}

// unknownRelease says that a release got no reply (err: a network error,
// the release timeout), or a refusal that go-redis sent it again on (see
// IsRedisError): whether Redis applied it is unknown.
func unknownRelease(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return err // not sent: the user closed the go-redis client
	}
	return fmt.Errorf("release sent, reply lost: outcome unknown (calling again resends it; unconfirmed, the hold ends with its lease): %w", err)
}

func (h *Holder) releaseLocked(ctx context.Context, op string, class Class, n int) error {
	if h.held[class] < n {
		return h.errorf(op, lockerr.NotHeld)
	}
	if r := h.pending; h.lost != nil && r != nil {
		// The lock was found gone after a final release whose reply was
		// lost: resend the release. Its request record answers 1 if the
		// release did run (the unlock succeeded, late); else the hold was
		// lost before it.
		h.sent++
		res, err := h.proto.Release(ctx, r)
		if err != nil {
			if IsRedisError(err) {
				h.pending = nil
			} else {
				err = unknownRelease(err)
			}
			return h.errorf(op, err)
		}
		h.pending = nil
		if res == 1 && r.Class == class && r.N == n {
			h.held, h.lost = r.Left(), nil
			return nil
		}
	}
	if h.lost != nil {
		// An owed unlock of a lost hold: nothing to send.
		err := h.lost
		h.held[class] -= n
		if h.held.Zero() {
			h.lost = nil
		}
		return h.errorf(op, err)
	}
	r := h.pending
	if r == nil {
		r = &Request{ID: h.NextRequest(), Class: class, N: n, Held: h.held, Lease: h.lease, Watched: h.watched, op: op}
	}
	final := r.Final()
	if final {
		// Stop renewing before the release is sent, so no renewal can
		// follow a completed unlock; the caller ended the hold, and so
		// its contexts, whatever the outcome.
		h.E.WD.Remove(h.hold)
		h.scope.End(context.Canceled)
		h.ending = true
	} else {
		h.needLocked(r.Left())
	}
	start := time.Now()
	h.sent++
	r.sends++
	res, err := h.proto.Release(ctx, r)
	if err != nil {
		if !IsRedisError(err) {
			// Unknown outcome: the next call resends the same request,
			// which the script answers as it answered the first.
			h.pending = r
			err = unknownRelease(err)
		} else if !final {
			// Refused: nothing changed at Redis; renewals expect the
			// units held again.
			h.needLocked(h.held)
		}
		if final && h.E.WD.Lapse(h.hold) {
			// The caller ended the hold: it is not renewed again, only
			// declared lost at its local deadline (by then its lease at
			// Redis has run out) unless a resend confirms the release
			// first; at once if the Client was closed meanwhile.
			h.lostLocked(lockerr.ClosedLoss)
		}
		return h.errorf(op, err)
	}
	h.pending = nil
	if r.sends == 1 && h.proto.Records() {
		h.E.Records.Done(r.Record(&h.Owner), start)
	}
	if res == 0 {
		h.loseLocked(lockerr.Loss(lockerr.Gone, "lock gone, expired or taken by another owner"))
		// This unlock is one of those owed.
		return h.releaseLocked(ctx, op, class, n)
	}
	h.held = r.Left()
	hold := h.hold
	if !final {
		// The handle keeps holds, whose lease the release restarted.
		if h.E.WD.Add(hold, start, h.lease, h.watched) {
			h.lostLocked(lockerr.ClosedLoss)
		}
		return nil
	}
	h.hold = nil
	if err := h.E.WD.Err(hold); err != nil {
		return h.errorf(op, fmt.Errorf("released after the hold was lost: %w", err))
	}
	if h.E.Observing() {
		ev := h.event(EventReleased, class, nil)
		ev.Held = time.Since(h.since)
		h.outbox = append(h.outbox, ev)
	}
	return nil
}

// LostErr returns why the handle's most recent hold was lost (matching
// lockerr.NotHeld; also lockerr.Closed when its Client was closed), or nil
// when it was not lost or the handle never held anything.
func (h *Holder) LostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return nil
	}
	return h.E.WD.Err(h.last)
}

// HoldContext returns a context derived from parent that is cancelled when
// the handle's current hold ends: with the loss as its cause (LostErr's
// error) when it is lost, right after Lost fires; with cause
// context.Canceled when the handle's last unit is released (the final
// release is called, whatever its outcome). When the handle holds nothing
// (or has lost it, or is past its local deadline: see Held), the context
// is cancelled already, with cause lockerr.NotHeld (or the loss).
func (h *Holder) HoldContext(parent context.Context) context.Context {
	h.mu.Lock()
	defer h.unlock()
	h.goneLocked() // past the local deadline: lost (see Held)
	switch {
	case h.lost != nil && h.scope != nil && h.last != nil && !IsClosed(h.last.Lost()):
		// Declared by the watchdog, which is about to close Lost and
		// then end the hold's contexts (OnEnd), this one among them: not
		// before Lost fires (an observer of the loss may be asking).
		return h.scope.Context(parent)
	case h.lost != nil:
		return Ended(parent, h.lost)
	case h.hold == nil || h.held.Zero() || h.scope == nil:
		return Ended(parent, lockerr.NotHeld)
	}
	return h.scope.Context(parent)
}

// IsClosed reports whether ch, a channel that is never sent on (a Lost
// channel), is closed.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Held returns the units of class the handle holds as far as it knows:
// 0 once its holds are lost. A hold past its local deadline is lost: if
// the watchdog's timer has not declared it yet (a timer fires late when
// the process is starved of CPU), Held declares it, as the timer would
// (Lost fires, the hold's contexts end, with relock.ErrLeaseExpired), so
// Held never reports a hold that may have expired at Redis, and a hold it
// reported gone stays gone.
func (h *Holder) Held(class Class) int {
	h.mu.Lock()
	defer h.unlock()
	if h.goneLocked() {
		return 0
	}
	return h.held[class]
}

// goneLocked reports whether the handle's holds are lost, declaring them
// lost first if they are past their local deadline (see Held).
func (h *Holder) goneLocked() bool {
	if h.hold != nil {
		switch declared, cause := h.E.WD.Gone(h.hold); {
		case declared:
			h.lostLocked(cause) // Lost has fired: the event is this handle's
		case cause != nil:
			h.forgetLocked(cause) // the watchdog's to report
		}
	}
	return h.lost != nil
}

// Lost returns a channel closed when the handle's current holds are lost;
// nil before its first grant.
func (h *Holder) Lost() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return nil
	}
	return h.last.Lost()
}

// Fence returns the fencing token of the hold of class, or 0 when the
// handle holds none (or lost it, or is past its local deadline: see Held) or
// fencing is off.
func (h *Holder) Fence(class Class) int64 {
	h.mu.Lock()
	defer h.unlock()
	if h.goneLocked() || h.held[class] == 0 {
		return 0
	}
	return h.fence[class]
}

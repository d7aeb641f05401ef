// Package watchdog keeps locks alive while their owners hold them.
//
// One Watchdog serves one relock.Client: a single goroutine renews every
// watched hold, whatever its lock type, in batches (many holds per script
// call, all calls of a round in one pipelined round trip). A renewal extends
// a hold only if its owner still holds the lock; it never recreates a missing
// key and never sends a non-positive expiry. When a renewal finds the lock
// gone or someone else's, or when no renewal is confirmed before the hold's
// local deadline, the hold is lost and its Lost channel is closed.
//
// Holds with a fixed lease are not renewed; the watchdog only closes their
// Lost channel at their local deadline.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/shard"
)

// BatchSize is the most holds renewed by one script call.
const BatchSize = 500

// claimBatch is how far ahead a claims round takes claims due soon.
const claimBatch = 20 * time.Millisecond

// Kinds of hold, as the renew script knows them.
const (
	KindString = "m" // plain mutex: a string holding the owner token
	KindHash   = "h" // reentrant and fair: a hash of owner -> count
	KindRW     = "w" // read/write lock
	// KindSemaphore is a semaphore: a hash of owner -> permits with the
	// owners' expiries in a sorted set (Hold.Aux), renewed like KindRW.
	KindSemaphore = "s"
)

// Drift is the safety margin subtracted from a lease to get a local
// deadline: 1% of the lease plus 2 ms, for clock rate differences between
// this process and Redis and for the time a reply spends in flight.
func Drift(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond
}

// Hold is one owner's hold of one lock, as the watchdog sees it.
type Hold struct {
	Key   string // the lock's main key
	Aux   string // KindRW, KindSemaphore: the owners' expiries (a sorted set); else ""
	Kind  string // KindString, KindHash, KindRW or KindSemaphore
	Token string // the owner token
	// Absent is, on a Redis Cluster, a key of the lock's slot that
	// nothing ever creates (core.Keys.Absent): a renewal that declares it
	// runs only where the slot is settled (see suspect). "" elsewhere.
	Absent string

	// Replicas, if > 0, is how many replicas must confirm each renewal
	// (WAIT on the renewal's connection, within ReplicaWait) before it
	// moves the hold's local deadline (relock.WithSyncReplicas).
	Replicas    int
	ReplicaWait time.Duration

	// OnLost, if set, is called when the watchdog itself declares the
	// hold lost (its deadline passed, a renewal found the lock gone, the
	// watchdog closed), from the goroutine that found out and without any
	// watchdog lock held. A loss declared by Lose does not call it.
	OnLost func(cause error)
	// OnEnd, if set, is called as OnLost is, right after Lost is closed
	// (the hold's contexts end then, so that whoever sees one of them
	// done can count on Lost having fired).
	OnEnd func(cause error)

	lost chan struct{}

	// Guarded by Watchdog.mu.
	active   bool
	renew    bool          // renewed every period
	lapsed   bool          // its final release is unconfirmed: not renewed, lost at its deadline (Lapse)
	claim    bool          // a claim (one renewal, soon) is due
	claimAt  time.Time     // when to send it (claims coalesce, and a hold released before needs none)
	claimTmr *time.Timer   // kicks a claims round at claimAt
	syncing  bool          // a renewal that replicas must confirm is in flight
	lease    time.Duration // what a renewal or the claim sets
	need     int           // KindSemaphore: the permits the owner must have (SetNeed)
	gen      uint64        // bumped by SetNeed
	// What the renewal in flight sends, and need's generation then.
	leaseMS  int64
	kindArg  string
	sentGen  uint64
	ext      uint64 // bumped by Extend
	sentExt  uint64 // ext when the renewal in flight was sent
	deadline time.Time
	err      error
	timer    *time.Timer

	// suspect: a renewal on a Cluster answered that the lock is gone,
	// which is not proof. Written only by apply for renewals the loop
	// goroutine sent (acks == nil), and read by that goroutine; a hold
	// whose renewals replicas confirm (Replicas > 0, fixed for the hold)
	// is never suspect, so renewSynced's goroutines read false. A
	// renewal declares only the hold's keys, so that it keeps following
	// a migrating slot; go-redis may then run it at the slot's importing
	// master with ASKING while the lock is still at the source (an ASK
	// followed after the slot had moved back and begun to move again,
	// as traced in the Cluster resharding test; go-redis 9.7's pipeline
	// retry may also move an ASKING in front of another command), where
	// it finds nothing: that test lost a hold, its lock alive at the
	// source. A suspect hold is asked again at once, alone and declaring
	// Absent, which a migrating slot refuses at both masters: only a
	// settled master's answer decides (see Watchdog.renewAll).
	suspect bool

	// flights counts the renewals of the hold that were picked to be
	// sent (under Watchdog.mu) and whose outcome is not in yet (see
	// Settle).
	flights atomic.Int32
}

// NewHold returns a hold for the owner token on key, not yet watched.
func NewHold(key, kind, token string) *Hold {
	return &Hold{Key: key, Kind: kind, Token: token, lost: make(chan struct{})}
}

// Flying reports whether a renewal of h is in flight (see Settle).
func (h *Hold) Flying() bool { return h.flights.Load() > 0 }

// Lost returns a channel closed when the hold is lost. A hold that ends by
// Remove (a normal release) is never lost and its channel stays open.
func (h *Hold) Lost() <-chan struct{} { return h.lost }

// Watchdog renews holds for one client. Its methods are safe for concurrent
// use.
type Watchdog struct {
	rdb     redis.UniversalClient
	scripts *scripts.Runner         // how renewals are sent (functions or scripts)
	shardOf func(key string) string // what routes a key to a server
	lease   time.Duration
	period  time.Duration

	// onRoundFailed, if set, is told of every renewal round that could
	// not confirm some renewals (see New).
	onRoundFailed func(holds int, err error)

	mu       sync.Mutex
	holds    map[*Hold]struct{}
	claims   map[*Hold]struct{} // the holds with a claim due (h.claim)
	closed   bool
	lostNews []*Hold // lost under mu, OnLost still to call (see unlock)
	// landed is closed, and replaced, whenever renewals in flight land
	// (see Settle).
	landed chan struct{}

	// ctx is cancelled by Close, so that a round in flight sends no more
	// retries (go-redis honours a context between attempts, and within
	// one only with ContextTimeoutEnabled).
	ctx    context.Context
	cancel context.CancelFunc
	// refused holds the renewals that a migrating slot refused, to be
	// sent again soon (see resendRefused); the loop's goroutine only.
	refused refusal

	kick  chan struct{} // a claim is due
	retry chan struct{} // renewals that replicas must confirm failed: retry soon
	stop  chan struct{}
	done  chan struct{}
}

// closeGrace is how long Close waits for a renewal round in flight. A round
// stuck on an unresponsive server returns by itself within go-redis's read
// timeout; Close does not wait that long, since every hold is already
// declared lost and nothing the round learns can revive one.
const closeGrace = 100 * time.Millisecond

// New starts a watchdog that renews holds to lease every lease/3, through
// sr (nil: a Runner of its own, as a Client on rdb would have). If
// onRoundFailed is not nil, the watchdog's goroutine calls it after every
// round that could not confirm the renewal of some holds (a transient
// error: it retries soon), with how many and the first error.
func New(rdb redis.UniversalClient, lease time.Duration, sr *scripts.Runner, onRoundFailed func(holds int, err error)) *Watchdog {
	if sr == nil {
		sr = scripts.NewRunner(rdb, false, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		ctx:           ctx,
		cancel:        cancel,
		rdb:           rdb,
		scripts:       sr,
		shardOf:       shardKey(rdb),
		lease:         lease,
		period:        lease / 3,
		onRoundFailed: onRoundFailed,
		holds:         make(map[*Hold]struct{}),
		claims:        make(map[*Hold]struct{}),
		landed:        make(chan struct{}),
		kick:          make(chan struct{}, 1),
		retry:         make(chan struct{}, 1),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
	}
	go w.loop()
	return w
}

// Lease is the lease the watchdog renews holds to.
func (w *Watchdog) Lease() time.Duration { return w.lease }

// Add watches h, whose acquire was sent at start with the given lease. With
// renew, the watchdog renews it to that lease (normally its own, Lease)
// every period from now on, and once soon if less than two periods of it
// are left (an acquire long on its way); without, it only declares it
// lost at start+lease-Drift(lease). Adding a hold that is
// already watched moves its deadline (a re-entry that reset the lease).
// On a closed watchdog it declares h lost instead, like Lose, and reports
// true.
func (w *Watchdog) Add(h *Hold, start time.Time, lease time.Duration, renew bool) (lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.err != nil {
		return false // lost holds stay lost: never renewed again
	}
	if w.closed {
		return w.loseQuietLocked(h, lockerr.ClosedLoss)
	}
	deadline := start.Add(lease - Drift(lease))
	if h.active && !deadline.After(h.deadline) {
		return
	}
	h.active, h.renew, h.lease, h.lapsed = true, renew, lease, false
	w.holds[h] = struct{}{}
	w.setDeadlineLocked(h, deadline)
	if left := time.Until(deadline); renew && !h.claim && left < 2*w.period {
		// A grant that was long on its way (an attempt sent before a
		// server restart or a failover, answered after it) has less of
		// its lease left than the rounds need to come by: the next one
		// may start after its deadline. One renewal goes soon, as a
		// claim's does.
		h.claim = true
		w.claims[h] = struct{}{}
		w.armClaimLocked(h, max(left/2, 0))
	}
	return false
}

// Extend takes note of an Extend of h, sent at start, that set its lease
// at Redis to lease (exactly for a fixed lease; at least, for a hold the
// watchdog renews, which it renews to lease from now on): its local
// deadline becomes start+lease-Drift(lease), earlier than before for a
// shorter fixed lease; for a renewed hold it only ever moves forward (a
// renewal may have kept a later one). A claim due for h is no longer
// needed. A lost hold stays lost; on a closed watchdog it declares h lost
// instead, like Lose, and reports true.
func (w *Watchdog) Extend(h *Hold, start time.Time, lease time.Duration) (lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.err != nil || !h.active {
		return false
	}
	if w.closed {
		return w.loseQuietLocked(h, lockerr.ClosedLoss)
	}
	h.lease = lease
	h.ext++
	deadline := start.Add(lease - Drift(lease))
	if h.renew && !deadline.After(h.deadline) {
		deadline = h.deadline
	}
	if h.claim {
		h.claim = false
		delete(w.claims, h)
		if h.claimTmr != nil {
			h.claimTmr.Stop()
			h.claimTmr = nil
		}
	}
	w.setDeadlineLocked(h, deadline)
	return false
}

// Cap moves h's local deadline to deadline if it is later: an Extend to a
// shorter fixed lease whose outcome is unknown may have shortened the
// lease at Redis.
func (w *Watchdog) Cap(h *Hold, deadline time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.active && h.err == nil && deadline.Before(h.deadline) {
		w.setDeadlineLocked(h, deadline)
	}
}

// ExtendCall returns the keys and arguments of the renew script
// (scripts.Renew) that extends the one hold h to lease: exactly (exact, a
// fixed lease, which may shorten it) or to at least lease. need is the
// permits the owner of a semaphore hold must have (see SetNeed).
func ExtendCall(h *Hold, lease time.Duration, exact bool, need int) (keys []string, args []any) {
	kind := h.Kind
	if exact {
		kind += "="
	}
	if h.Kind == KindSemaphore {
		kind += strconv.Itoa(need)
	}
	keys = []string{h.Key}
	if h.Aux != "" {
		keys = append(keys, h.Aux)
	}
	return keys, []any{kind, h.Token, lease.Milliseconds()}
}

// Claim watches h, a hold that another owner's release granted to this
// owner with a short claim lease, at the latest at start: its local
// deadline is start+claim-Drift(claim) until the watchdog, in its own
// goroutine, has extended it to lease (the claim). After that, with renew,
// it renews h every period like Add; without, it declares h lost at the
// claim's time + lease.
//
// The claim is sent a little later, not at once: a quarter of the claim
// lease (at most half the time left before the deadline). Claims then
// share round trips, and a hold released before (a short critical section
// under contention) needs no claim at all.
func (w *Watchdog) Claim(h *Hold, start time.Time, claim, lease time.Duration, renew bool) (lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.err != nil {
		return false
	}
	if w.closed {
		return w.loseQuietLocked(h, lockerr.ClosedLoss)
	}
	h.active, h.renew, h.claim, h.lease, h.lapsed = true, renew, true, lease, false
	w.holds[h] = struct{}{}
	w.claims[h] = struct{}{}
	deadline := start.Add(claim - Drift(claim))
	w.setDeadlineLocked(h, deadline)
	w.armClaimLocked(h, max(min(claim/4, time.Until(deadline)/2), 0))
	return false
}

// armClaimLocked has a claims round kicked after delay for h.
func (w *Watchdog) armClaimLocked(h *Hold, delay time.Duration) {
	h.claimAt = time.Now().Add(delay)
	if h.claimTmr != nil {
		h.claimTmr.Stop()
	}
	h.claimTmr = time.AfterFunc(delay, func() {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	})
}

// SetNeed sets how many permits the owner of h, a KindSemaphore hold,
// must have in Redis for a renewal to extend it: the permits its handle
// counts. A renewal that finds fewer (the semaphore was force-released,
// and a grant gave the owner fewer than it counts) declares h lost. The
// handle lowers it before it sends a release of some permits and raises
// it once an acquire of more is confirmed, so Redis never has fewer
// while the owner holds them; a renewal sent before a change that finds
// fewer is asked again instead.
func (w *Watchdog) SetNeed(h *Hold, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.need != n {
		h.need = n
		h.gen++
	}
}

// Lapse watches h again after a Remove whose final release could not be
// confirmed (Redis unreachable, no reply in time), without renewing it:
// the owner asked to end the hold, so no renewal or claim is sent any
// more, and h is declared lost at the local deadline it had (by then its
// lease at Redis has run out) unless Remove comes first (a resent release
// that is confirmed). On a closed watchdog it declares h lost instead,
// like Lose, and reports true.
func (w *Watchdog) Lapse(h *Hold) (lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.err != nil || h.active {
		return false
	}
	if w.closed {
		return w.loseQuietLocked(h, lockerr.ClosedLoss)
	}
	h.active, h.renew, h.claim, h.lapsed = true, false, false, true
	w.holds[h] = struct{}{}
	w.setDeadlineLocked(h, h.deadline)
	return false
}

// setDeadlineLocked moves h's local deadline and its timer. Every watched
// hold has a timer at its deadline, so a hold is declared lost on time even
// while a renewal round hangs on an unresponsive connection.
func (w *Watchdog) setDeadlineLocked(h *Hold, deadline time.Time) {
	h.deadline = deadline
	if h.timer == nil {
		h.timer = time.AfterFunc(time.Until(deadline), func() { w.expire(h) })
		return
	}
	h.timer.Reset(time.Until(deadline))
}

// Remove stops watching h without declaring it lost. When Remove returns,
// no renewal of h is sent any more and h.Lost is never closed by the
// watchdog; a renewal already in flight can only extend a lock that the
// owner still holds, and its outcome is ignored.
func (w *Watchdog) Remove(h *Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(h)
}

// Settle waits until no renewal of h is in flight: one picked before h
// was removed may still reach Redis, and its owner check knows only the
// owner token, so it would extend the owner's next hold of the same lock
// to the watchdog's lease (a handle's next Lock after its Unlock). A
// handle settles its last hold's renewals before it asks for a new hold.
// Settle returns ctx's error if ctx ends first; with nothing in flight
// (almost always) it returns at once. A renewal in flight lands within its
// round's timeout, on an unreachable Redis too (a round's renewals land
// together: a slow shard holds up a new hold on another one, during that
// round only). It may be called from an observer that the watchdog's own
// goroutine runs: a renewal lands before its outcome is told.
func (w *Watchdog) Settle(ctx context.Context, h *Hold) error {
	for h.Flying() {
		w.mu.Lock()
		landed, flying := w.landed, h.Flying()
		w.mu.Unlock()
		if !flying {
			return nil
		}
		select {
		case <-landed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// boardLocked counts a renewal of each hold of holds in flight (Settle).
func boardLocked(holds []*Hold) {
	for _, h := range holds {
		h.flights.Add(1)
	}
}

// landLocked counts the renewals of batches, boarded before they were
// sent, as landed: their outcome is in (or they failed). apply calls it
// before it tells anyone of a loss, so that an observer that locks again
// from the watchdog's goroutine does not wait for itself.
func (w *Watchdog) landLocked(batches [][]*Hold) {
	for _, b := range batches {
		for _, h := range b {
			h.flights.Add(-1)
		}
	}
	close(w.landed)
	w.landed = make(chan struct{})
}

// boardActive boards, and returns, those of holds still watched (the
// suspects asked again: see renewAll).
func (w *Watchdog) boardActive(holds []*Hold) []*Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	var still []*Hold
	for _, h := range holds {
		if h.active {
			still = append(still, h)
		}
	}
	boardLocked(still)
	return still
}

// Lose declares h lost because of cause (the owner learned it from Redis).
// It reports whether this call declared it (false: it was lost already).
// It does not call h.OnLost: the caller reports the loss itself.
func (w *Watchdog) Lose(h *Hold, cause error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loseQuietLocked(h, cause)
}

// loseQuietLocked declares h lost for a caller that reports the loss
// itself (h.OnLost is not called), and reports whether h was not lost yet.
func (w *Watchdog) loseQuietLocked(h *Hold, cause error) bool {
	w.removeLocked(h)
	if h.err != nil {
		return false
	}
	h.err = cause
	close(h.lost)
	return true
}

// Gone returns h's loss, or nil while h is live. That is the loss already
// declared or, when h is past its local deadline and its timer has not
// fired yet (a timer fires late when this process is starved of CPU), the
// loss that timer would declare, which Gone then declares itself, quietly
// as Lose does: declared is true, h.OnLost is not called, and the caller
// reports the loss.
func (w *Watchdog) Gone(h *Hold) (declared bool, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.err != nil {
		return false, h.err
	}
	if !h.active || time.Now().Before(h.deadline) {
		return false, nil
	}
	cause = deadlineLoss(h)
	return w.loseQuietLocked(h, cause), cause
}

// deadlineLoss is the loss of h at its local deadline.
func deadlineLoss(h *Hold) error {
	switch {
	case h.lapsed:
		return lockerr.Loss(lockerr.Expired, "lease ran out after an unconfirmed release")
	case h.renew:
		return lockerr.Loss(lockerr.Expired, "no renewal confirmed before the local deadline")
	}
	return lockerr.Loss(lockerr.Expired, "lease ran out")
}

// Err returns why h was lost, or nil while it is not.
func (w *Watchdog) Err(h *Hold) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return h.err
}

// Len is the number of watched holds.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.holds)
}

// Close stops the watchdog goroutine. Holds still watched are declared
// lost before Close returns; their locks expire within one lease of their
// last renewal. Close waits for the goroutine for at most closeGrace: a
// renewal round in flight on an unresponsive server is left to end by
// itself (within go-redis's read timeout, without retries), and its
// outcome is ignored (it may still have renewed a lock once).
func (w *Watchdog) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		for h := range w.holds {
			w.loseLocked(h, lockerr.ClosedLoss)
		}
		w.cancel()
		close(w.stop)
	}
	w.unlock()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
}

func (w *Watchdog) removeLocked(h *Hold) {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.claimTmr != nil {
		h.claimTmr.Stop()
		h.claimTmr = nil
	}
	h.active = false
	delete(w.holds, h)
	delete(w.claims, h)
}

// loseLocked declares h lost, found by the watchdog itself; unlock then
// calls h.OnLost and closes h.Lost (in that order, so that whoever sees
// Lost fire can count on the observers having been told).
func (w *Watchdog) loseLocked(h *Hold, cause error) {
	w.removeLocked(h)
	if h.err != nil {
		return
	}
	h.err = cause
	w.lostNews = append(w.lostNews, h)
}

// unlock releases w.mu, then tells the holds declared lost meanwhile.
func (w *Watchdog) unlock() {
	news := w.lostNews
	w.lostNews = nil
	w.mu.Unlock()
	for _, h := range news {
		if h.OnLost != nil {
			h.OnLost(h.err)
		}
		close(h.lost)
		if h.OnEnd != nil {
			h.OnEnd(h.err)
		}
	}
}

func (w *Watchdog) expire(h *Hold) {
	w.mu.Lock()
	defer w.unlock()
	if !h.active || time.Now().Before(h.deadline) {
		return
	}
	w.loseLocked(h, deadlineLoss(h))
}

func (w *Watchdog) loop() {
	defer close(w.done)
	t := time.NewTimer(w.period)
	defer t.Stop()
	soon := min(w.period/4, 500*time.Millisecond) // a retry after a failed round
	reset := func(d time.Duration) {
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(d)
	}
	// resend times the next try of renewals a migrating slot refused.
	resend := time.NewTimer(time.Hour)
	resend.Stop()
	defer resend.Stop()
	again := func() {
		if d, ok := w.refused.pending(); ok {
			resend.Reset(d)
		}
	}
	for {
		select {
		case <-w.stop:
			return
		case <-w.retry:
			reset(soon)
			continue
		case <-resend.C:
			w.resendRefused()
			again()
			continue
		case <-w.kick:
			// Claims only, at once; the period's round keeps its time,
			// unless the claims failed: then a full round, soon, retries
			// them.
			if !w.round(true) {
				reset(soon)
				again()
			}
			continue
		case <-t.C:
		}
		started := time.Now()
		next := w.period
		if !w.round(false) {
			// Transient failure: retry soon, until each hold's deadline.
			next = soon
			again()
		}
		// Rounds start a period apart, however long a round took.
		t.Reset(max(next-time.Since(started), 0))
	}
}

// round renews every renewable hold once and sends every due claim; with
// claimsOnly, only the claims. It reports false when some renewal could not
// be confirmed and should be retried soon. Renewals that replicas must
// confirm run apart (renewSynced), so that a slow WAIT does not hold up
// the others; their failures ask for a retry on w.retry.
func (w *Watchdog) round(claimsOnly bool) bool {
	now := time.Now()
	w.mu.Lock()
	candidates := w.holds
	if claimsOnly {
		candidates = w.claims
	}
	var plain, synced []*Hold
	var latest, latestSynced time.Time // the last deadline of a due hold
	for h := range candidates {
		// A hold past its deadline is declared lost by its timer (expire);
		// one whose synced renewal is in flight waits for its outcome.
		if !now.Before(h.deadline) || h.syncing {
			continue
		}
		// A claims round also takes the claims due in the next few ms.
		claim := h.claim && (!claimsOnly || h.claimAt.Before(now.Add(claimBatch)))
		if !claim && (!h.renew || claimsOnly) {
			continue
		}
		h.leaseMS, h.kindArg, h.sentGen, h.sentExt = h.lease.Milliseconds(), h.Kind, h.gen, h.ext
		if h.need > 0 {
			h.kindArg += strconv.Itoa(h.need)
		}
		if h.Replicas > 0 {
			h.syncing = true
			synced = append(synced, h)
			if h.deadline.After(latestSynced) {
				latestSynced = h.deadline
			}
			continue
		}
		plain = append(plain, h)
		if h.deadline.After(latest) {
			latest = h.deadline
		}
	}
	boardLocked(synced)
	boardLocked(plain)
	w.mu.Unlock()
	if len(synced) > 0 {
		go w.renewSynced(now, group(synced, w.shardOf), latestSynced)
	}
	if len(plain) == 0 {
		return true
	}

	// A renewal confirmed before a hold's deadline keeps it: a round may
	// take that long (many holds, a slow server), and at least a period.
	ctx, cancel := context.WithTimeout(w.ctx, max(w.period, time.Second, time.Until(latest)))
	defer cancel()
	ok, batches, cmds := w.renewAll(ctx, now, group(plain, w.shardOf), true)
	if ok {
		return true
	}
	w.refused = refusal{first: now}
	w.refused.take(w.rdb, batches, cmds)
	return false
}

// renewAll sends the renewals of batches (at now) and takes their
// outcome (apply); then it asks again, at once, for the holds that a
// Cluster said were gone (see Hold.suspect), each alone in its call. It
// reports whether every renewal was confirmed, and returns every batch
// sent with its command, for the refusals to be sent again. With report,
// a failure is told to onRoundFailed once: the second call reports only
// if the first confirmed every renewal.
func (w *Watchdog) renewAll(ctx context.Context, now time.Time, batches [][]*Hold, report bool) (bool, [][]*Hold, []*redis.Cmd) {
	cmds := make([]*redis.Cmd, len(batches))
	w.send(ctx, w.rdb, batches, cmds)
	ok, suspects := w.apply(now, batches, cmds, nil, report)
	// Boarded again: apply landed them (see landLocked), and one may have
	// been released since.
	if suspects = w.boardActive(suspects); len(suspects) == 0 {
		return ok, batches, cmds
	}
	again := group(suspects, w.shardOf)
	againCmds := make([]*redis.Cmd, len(again))
	sent := time.Now()
	w.send(ctx, w.rdb, again, againCmds)
	if ok2, _ := w.apply(sent, again, againCmds, nil, report && ok); !ok2 {
		ok = false
	}
	return ok, append(batches, again...), append(cmds, againCmds...)
}

// refusal is the renewals that a migrating slot refused, and when and how
// often they were sent.
type refusal struct {
	batches [][]*Hold
	first   time.Time
	tries   int
}

// take keeps the batches whose renewal (cmds) a migrating slot refused
// (shard.Unsettled), and counts a try.
func (r *refusal) take(rdb redis.UniversalClient, batches [][]*Hold, cmds []*redis.Cmd) {
	r.batches = r.batches[:0]
	for i, c := range cmds {
		if shard.Unsettled(rdb, c.Err()) {
			r.batches = append(r.batches, batches[i])
		}
	}
	r.tries++
}

// pending reports whether refused renewals are to be sent again, and
// after how long: as lock calls are (shard.Backoff), for up to
// shard.MaxUnsettled.
func (r *refusal) pending() (time.Duration, bool) {
	if len(r.batches) == 0 || time.Since(r.first) >= shard.MaxUnsettled {
		return 0, false
	}
	return shard.Backoff(r.tries), true
}

// resendRefused sends again the renewals that a migrating slot refused
// (Watchdog.refused): while a slot moves, its masters refuse a script of
// its keys whenever one of its declared keys is on the other side (or, a
// solo read/write lock's or semaphore's, missing), and go-redis follows
// the refusals for a few milliseconds only, so that the round's retry (a
// quarter period later) could miss every gap until the lease ran out.
// The loop calls it between its rounds and claims, so neither waits for
// a move; only the round's first failure is reported (onRoundFailed).
func (w *Watchdog) resendRefused() {
	r := &w.refused
	now := time.Now()
	latest := now
	// Only the holds still renewed: one released meanwhile (Remove, or
	// Lapse after an unconfirmed release) gets no renewal after its
	// release was called, and one past its deadline is lost already.
	var batches [][]*Hold
	w.mu.Lock()
	for _, b := range r.batches {
		var still []*Hold
		for _, h := range b {
			if !h.active || h.lapsed || !(h.renew || h.claim) || !now.Before(h.deadline) {
				continue
			}
			still = append(still, h)
			if h.deadline.After(latest) {
				latest = h.deadline
			}
		}
		if len(still) > 0 {
			boardLocked(still)
			batches = append(batches, still)
		}
	}
	w.mu.Unlock()
	if len(batches) == 0 {
		r.batches = r.batches[:0]
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, max(w.period, time.Second, time.Until(latest)))
	defer cancel()
	_, batches, cmds := w.renewAll(ctx, time.Now(), batches, false)
	r.take(w.rdb, batches, cmds)
}

// pipeliner is what renewals are sent through: the Client's Redis client,
// or a connection to one node.
type pipeliner interface {
	scripts.Caller
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// How renewCmd sends a renewal.
const (
	asFunction = iota // FCALL of relock's function library
	asScript          // EVALSHA
	asSource          // EVAL
)

// send sends the renewals of batches through via in one pipeline (see
// shard.Pipelined for a Cluster), into
// cmds: as functions while the Client's Runner has them, loading the
// library where a server lacks it (a new server, a restart) and sending
// them again, and otherwise as scripts, whose source goes once to a
// server without them (a restart, SCRIPT FLUSH, a Ring or Cluster shard
// that never saw it), as Runner.Run does for a single call.
func (w *Watchdog) send(ctx context.Context, via pipeliner, batches [][]*Hold, cmds []*redis.Cmd) {
	exec := func(how int) error {
		return shard.Pipelined(ctx, via, func(p redis.Pipeliner) []redis.Cmder {
			queued := make([]redis.Cmder, len(batches))
			for i, b := range batches {
				cmds[i] = renewCmd(ctx, p, b, how)
				queued[i] = cmds[i]
			}
			return queued
		})
	}
	how := asScript
	if w.scripts.Functions() {
		how = asFunction
	}
	err := exec(how)
	if how == asFunction {
		again := false
		for i, c := range cmds {
			switch e := c.Err(); {
			case scripts.NotFound(e):
				if lerr := w.scripts.Load(ctx, via, []string{batches[i][0].Key}); scripts.Unusable(lerr) {
					w.scripts.Off(lerr)
				}
				again = true
			case scripts.Unusable(e):
				w.scripts.Off(e)
			}
		}
		switch {
		case !w.scripts.Functions():
			how = asScript
			err = exec(how)
		case again:
			err = exec(how)
		}
	}
	if how == asScript && err != nil && isNoScript(err) {
		_ = exec(asSource)
	}
}

// apply takes the outcome of the renewals of batches, sent at now: each
// hold renewed gets a new deadline, each found gone is lost, but on a
// Cluster, where a first "gone" makes a hold suspect, returned for the
// caller to ask again (see Hold.suspect). acks, for renewals that
// replicas must confirm, is how many confirmed each batch (a nil
// command: a batch that was not sent; each was sent on its master's own
// connection, which never follows a redirect: its "gone" is the
// master's). It reports whether every renewal was confirmed, and, with
// report, tells onRoundFailed if not. It lands the renewals of batches
// (see Settle): a suspect asked again is boarded again.
func (w *Watchdog) apply(now time.Time, batches [][]*Hold, cmds []*redis.Cmd, acks []int64, report bool) (bool, []*Hold) {
	failed, again := 0, false
	var suspects []*Hold
	var firstErr error
	fail := func(n int, err error) {
		failed += n
		if firstErr == nil {
			firstErr = err
		}
	}
	w.mu.Lock()
	for i, b := range batches {
		if acks != nil {
			for _, h := range b {
				h.syncing = false
			}
		}
		if cmds[i] == nil {
			fail(len(b), fmt.Errorf("watchdog: no node for a renewal that replicas must confirm"))
			continue
		}
		res, err := cmds[i].Int64Slice()
		if err == nil && len(res) != len(b) {
			err = fmt.Errorf("watchdog: renewal reply of %d holds for %d", len(res), len(b))
		}
		if err != nil {
			fail(len(b), err)
			continue
		}
		for j, h := range b {
			if !h.active {
				continue // released meanwhile: the outcome does not matter
			}
			if res[j] == 1 && acks != nil && acks[i] < int64(h.Replicas) {
				// Extended at the master, not confirmed by enough replicas:
				// the deadline stays, and the renewal is retried soon.
				fail(1, fmt.Errorf("watchdog: %d of %d replicas confirmed a renewal", acks[i], h.Replicas))
				continue
			}
			if res[j] == 1 && acks == nil {
				h.suspect = false // a settled master has it (see Hold.suspect)
			}
			if res[j] == 1 && h.ext != h.sentExt {
				// An Extend was sent meanwhile: whichever of the two ran
				// last at Redis, the lease is at least what the Extend
				// took note of; its deadline stands.
				continue
			}
			if res[j] == 1 {
				h.claim = false
				delete(w.claims, h)
				if h.claimTmr != nil {
					h.claimTmr.Stop()
					h.claimTmr = nil
				}
				sent := time.Duration(h.leaseMS) * time.Millisecond
				w.setDeadlineLocked(h, now.Add(sent-Drift(sent)))
				continue
			}
			if h.gen != h.sentGen {
				// The owner's permits changed meanwhile (a release of some
				// may have been applied before the renewal that expected
				// more): ask again, soon.
				again = true
				continue
			}
			if acks == nil && h.Absent != "" && !h.suspect {
				h.suspect = true
				suspects = append(suspects, h)
				continue
			}
			w.loseLocked(h, lockerr.Loss(lockerr.Gone, "lock gone or taken by another owner"))
		}
	}
	w.landLocked(batches)
	w.unlock()
	if failed > 0 {
		// A node out of reach may have failed over: the retry goes to
		// the new master once the cluster client has seen it.
		shard.Refresh(w.rdb, firstErr)
	}
	if failed > 0 && report && w.onRoundFailed != nil && w.ctx.Err() == nil {
		w.onRoundFailed(failed, firstErr)
	}
	return failed == 0 && !again, suspects
}

// renewSynced renews, in its own goroutine, the batches of holds sent at
// now that need replicas to confirm: each batch (one shard) on one
// connection to its node, followed there by WAIT for the most replicas
// and the longest timeout any of its holds asks (go-redis's Wait, whose
// reply may take that long beyond the read timeout; a pipeline's may
// not). It gives up at the latest deadline of the holds, after which
// they are lost anyway. A failure asks the loop for a retry soon.
func (w *Watchdog) renewSynced(now time.Time, batches [][]*Hold, latest time.Time) {
	ctx, cancel := context.WithTimeout(w.ctx, max(w.period, time.Second, time.Until(latest)))
	defer cancel()
	cmds := make([]*redis.Cmd, len(batches))
	acks := make([]int64, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		node := w.node(ctx, b[0].Key)
		if node == nil {
			continue
		}
		n, t := 0, time.Duration(0)
		for _, h := range b {
			n, t = max(n, h.Replicas), max(t, h.ReplicaWait)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := node.Conn()
			defer conn.Close()
			w.send(ctx, conn, [][]*Hold{b}, cmds[i:i+1])
			if cmds[i].Err() == nil {
				acks[i], _ = conn.Wait(ctx, n, t).Result()
			}
		}()
	}
	wg.Wait()
	if ok, _ := w.apply(now, batches, cmds, acks, true); !ok {
		select {
		case w.retry <- struct{}{}:
		default:
		}
	}
}

// node returns the client of the node that serves key: the client itself
// on a single server, the master of key's slot on a Cluster; nil when it
// cannot be had (WithSyncReplicas refuses a Ring).
func (w *Watchdog) node(ctx context.Context, key string) *redis.Client {
	n, err := shard.Node(ctx, w.rdb, key)
	if err != nil {
		return nil
	}
	return n
}

// renewCmd renews (or claims) every hold of b to the lease round noted,
// sent as how says.
func renewCmd(ctx context.Context, p redis.Pipeliner, b []*Hold, how int) *redis.Cmd {
	keys := make([]string, 0, len(b))
	args := make([]any, 0, 3*len(b))
	for _, h := range b {
		keys = append(keys, h.Key)
		if h.Aux != "" {
			keys = append(keys, h.Aux)
		}
		args = append(args, h.kindArg, h.Token, h.leaseMS)
	}
	if len(b) == 1 && b[0].suspect {
		keys = append(keys, b[0].Absent) // alone in its batch: see group
	}
	switch how {
	case asFunction:
		return p.FCall(ctx, scripts.Renew.Function(false), keys, args...)
	case asSource:
		return scripts.Renew.Eval(false).Eval(ctx, p, keys, args...)
	}
	return scripts.Renew.Eval(false).EvalSha(ctx, p, keys, args...)
}

// group splits holds into script calls of at most BatchSize holds whose
// keys the client routes to the same server (see Watchdog.shardOf), so every
// call is valid on Cluster and Ring too.
func group(holds []*Hold, shardOf func(key string) string) [][]*Hold {
	bySlot := make(map[string][]*Hold)
	for _, h := range holds {
		s := shardOf(h.Key)
		if (h.Aux != "" || h.suspect) && s != "" {
			// A read/write lock's or a semaphore's renewal declares its
			// owners' sorted set too, which a solo lock lacks: a
			// migrating slot refuses it for as long as the move lasts
			// (a multi-key call with a key missing). Alone in its
			// batch, it does not take the other holds of the slot with
			// it. So does a suspect hold's, which declares the slot's
			// Absent key (see Hold.suspect).
			s += "\x00" + h.Key
		}
		bySlot[s] = append(bySlot[s], h)
	}
	var out [][]*Hold
	for _, hs := range bySlot {
		for len(hs) > BatchSize {
			out = append(out, hs[:BatchSize])
			hs = hs[BatchSize:]
		}
		out = append(out, hs)
	}
	return out
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && len(err.Error()) >= 8 && err.Error()[:8] == "NOSCRIPT"
}

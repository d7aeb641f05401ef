package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// ErrNoQuorum is returned when a majority of the masters could not be
// reached or asked: too many are down, unreachable, slower than the
// attempt timeout, or their Clients are closed. The error wraps each
// master's own error. From Lock it also matches relock.ErrNotObtained.
var ErrNoQuorum = errors.New("redlock: a majority of masters could not be reached")

// Kind is the lock type's name in keys, events and errors.
const Kind = "redlock"

// noHandoff is the starvation threshold (ms) passed to the mutex scripts
// (their optional last argument):
// a release never grants the lock to a waiter on one master (a grant on
// one master is no majority), it only wakes waiters.
const noHandoff = int64(1e12)

// Mutex is a handle on a lock held on a majority of N independent Redis
// masters. The handle is the owner: one random 128-bit token, the same on
// every master. A Mutex is made by New, is safe for concurrent use and
// must not be copied. It is not reentrant.
type Mutex struct {
	name   string
	token  string
	owners []core.Owner // one per master, all with token
	keys   core.Keys
	kkeys  []string // the KEYS of the mutex scripts (the same on every master)
	quorum int      // len(owners)/2 + 1
	// lease is the hold's validity: the smallest of its parts' leases
	// (each master's part is taken with its own owner's Lease, what its
	// Client's watchdog renews it to).
	lease   time.Duration
	timeout time.Duration // how long one attempt waits for the masters' replies
	hbMS    int64
	err     error // constructor-time

	bmu   sync.Mutex
	lanes []lane // per master (see lane)

	mu   sync.Mutex // serializes the handle's requests; never held while waiting
	cur  *hold      // the hold not yet unlocked (lost or not), or nil
	last atomic.Pointer[hold]
}

// New returns a handle on the lock called name over the masters reached
// through clients, one relock.Client per independent Redis deployment
// (a single server, or a Cluster or failover group: each is one vote).
// It never fails: no client, a nil or repeated Client (or two go-redis
// clients of the same address), an invalid name or option, or
// relock.WithFencing or relock.WithSyncReplicas (see the package
// documentation) is reported by every call, as an error matching
// relock.ErrNilClient, relock.ErrInvalidName or relock.ErrInvalidOption.
//
// Any number of masters is accepted; the majority is len(clients)/2+1.
// Use an odd number (3 or 5): 4 masters tolerate one failure, as 3 do.
//
// With relock.WithLease, every master's part of a hold gets that lease
// (with LockFor, that hold's lease). Without, each part gets its own
// Client's watchdog timeout, which that
// Client's watchdog renews it to (Clients with different timeouts are
// fine: each part is renewed at a third of its own lease). The lease
// below, the hold's validity, is the smallest of them: an acquire is
// valid when a majority granted it within that time (less the time taken
// and the drift). The attempt timeout, how long an attempt waits for a
// master's reply, is a tenth of the lease, within [100 ms, 1 s] and at
// most a third of the lease. An Unlock waits longer for a majority to
// confirm: up to half the lease, at most 5 s.
//
// relock.WithMetadata is kept beside the owner on each master, where a
// mutex keeps it; a redlock has no Holders method and the relock command
// (which reads one Redis) does not show redlocks, so nothing of relock
// reads it back yet.
func New(clients []*relock.Client, name string, opts ...relock.LockOption) *Mutex {
	m := &Mutex{name: name, keys: core.NewKeys(Kind, name), quorum: len(clients)/2 + 1}
	m.kkeys = []string{m.keys.Lock} // the scripts build the lock's other keys (see scripts.deriving)
	m.err = m.init(clients, core.Options(opts))
	return m
}

func (m *Mutex) init(clients []*relock.Client, opts []func(*core.LockConfig)) error {
	if len(clients) == 0 {
		return fmt.Errorf("%w: no master", lockerr.InvalidOption)
	}
	seen := map[any]int{}
	for i, c := range clients {
		o := core.NewOwner(c, Kind, m.name, opts)
		if i == 0 {
			m.token = o.Token
		}
		o.Token = m.token
		m.owners = append(m.owners, o)
		if c == nil || o.E == nil {
			return fmt.Errorf("%w: master %d", lockerr.NilClient, i)
		}
		if err := o.Check(); err != nil && !errors.Is(err, lockerr.Closed) {
			return fmt.Errorf("master %d: %w", i, err)
		}
		for _, id := range []any{o.E, addrOf(o.E.RDB)} {
			if id == "" {
				continue
			}
			if j, ok := seen[id]; ok {
				return fmt.Errorf("%w: masters %d and %d are the same server: a lock over them is no safer than over one",
					lockerr.InvalidOption, j, i)
			}
			seen[id] = i
		}
	}
	o := &m.owners[0]
	if o.Cfg.SyncReplicas > 0 {
		return fmt.Errorf("%w: %s does not wait for replicas (WithSyncReplicas): its masters are independent servers, without replicas that could take over",
			lockerr.InvalidOption, Kind)
	}
	if o.Cfg.Fencing {
		return fmt.Errorf("%w: %s has no fencing token: independent masters cannot agree on a strictly increasing one (see the package documentation)",
			lockerr.InvalidOption, Kind)
	}
	m.lease = o.Lease()
	for i := range m.owners {
		m.lease = min(m.lease, m.owners[i].Lease())
	}
	m.timeout = attemptTimeout(m.lease)
	m.lanes = make([]lane, len(m.owners))
	m.hbMS = o.Heartbeat().Milliseconds()
	return nil
}

// addrOf returns the address of a single-server go-redis client, or "".
func addrOf(rdb redis.UniversalClient) string {
	if c, ok := rdb.(*redis.Client); ok && c != nil {
		return c.Options().Addr
	}
	return ""
}

// attemptTimeout is how long one attempt waits for the masters' replies:
// a tenth of the lease, at least 100 ms (a first request on a new
// connection, a loaded machine), at most a second, and never more than a
// third of the lease. A master slower than that counts as not answering;
// healthy masters answer in a fraction of it, and an attempt decides as
// soon as their replies allow.
func attemptTimeout(lease time.Duration) time.Duration {
	return min(max(lease/10, 100*time.Millisecond), lease/3, time.Second)
}

// releaseTimeout is how long an Unlock waits for the masters' replies when
// a majority has not confirmed yet: a release is worth more patience than
// an attempt (there is no validity time to lose), up to half the lease and
// at most 5 s, never less than the attempt timeout.
func releaseTimeout(lease time.Duration) time.Duration {
	return max(attemptTimeout(lease), min(lease/2, 5*time.Second))
}

// Lock acquires the lock on a majority of the masters, waiting while
// another owner holds it, until it is acquired or ctx ends.
//
// Each attempt asks every master at once (in parallel) and succeeds when
// a majority granted it before the validity time ran out (lease - time
// taken - drift); the masters that granted it to an attempt that failed
// are released at once. While the lock is held elsewhere, Lock waits for a
// release (pushed by every master through its Client's subscription) or
// for a timer (the holder's remaining lease, at most a second); after an
// attempt that split the masters with other contenders it backs off for a
// random time, so contenders do not retry in step.
//
// Lock returns an error matching ErrNoQuorum (and relock.ErrNotObtained)
// when fewer than a majority of the masters answered an attempt; on ctx
// end, an error matching relock.ErrNotObtained and ctx.Err(). Either way
// what it took is released, and it leaves nothing behind. Lock on a handle
// that holds the lock returns relock.ErrAlreadyHeld; after a loss,
// relock.ErrNotHeld until Unlock has reported it.
func (m *Mutex) Lock(ctx context.Context) error {
	if m.err != nil {
		return m.errorf("lock", m.err)
	}
	return m.lock(ctx, 0)
}

// LockFor is Lock for a hold with a lease of its own (Redisson's
// lock(leaseTime)): every master's part of it is taken with lease, and
// no watchdog renews it, as with relock.WithLease but for this hold only.
// Its validity is lease: an attempt succeeds when a majority granted it
// within lease (less the time taken and the drift), and the hold is lost
// (Lost fires, with relock.ErrLeaseExpired) when fewer than a majority of
// its parts have time left, lease after the attempt was sent, unless
// Unlock or Extend comes first. The attempt timeout is the one of that
// lease (see New). lease must lie in [10ms, 7 days]; otherwise LockFor
// returns an error matching relock.ErrInvalidOption at once, and sends
// nothing.
func (m *Mutex) LockFor(ctx context.Context, lease time.Duration) error {
	if err := m.checkLease(lease); err != nil {
		return m.errorf("lock", err)
	}
	return m.lock(ctx, lease)
}

// TryLockFor is TryLock with LockFor's lease.
func (m *Mutex) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	if err := m.checkLease(lease); err != nil {
		return false, m.errorf("trylock", err)
	}
	return m.tryLock(ctx, lease)
}

// checkLease returns why a hold of lease cannot be asked for: the
// handle's constructor-time error, or a lease out of bounds.
func (m *Mutex) checkLease(lease time.Duration) error {
	if m.err != nil {
		return m.err
	}
	return core.CheckLease("lease", lease)
}

// TryLock makes one attempt on every master: (true, nil) if a majority
// granted it; (false, nil) if a majority of the masters answered but not
// enough of them granted it, because another owner holds it; (false, err)
// with err matching ErrNoQuorum if fewer than a majority answered. It
// never waits for the lock, and what a failed attempt took is released.
//
// When contenders split the masters between them (nobody got a
// majority, and each gave back what it took; seen as an attempt that got
// some masters but not a majority), TryLock tries again after a random
// delay of a few milliseconds (Redlock's retry), up to three times while
// ctx allows; if the masters are still split then (a lasting split: a
// partial hold of another owner, or masters down), it returns (false,
// nil). An owner that holds a bare majority while other masters are free
// looks the same: a TryLock then makes four attempts, a few milliseconds
// apart, before it returns (false, nil). Each attempt starts with a native
// SET NX on every master, and sends the acquire script where that was
// refused: a TryLock of a held lock costs two commands per master.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	if m.err != nil {
		return false, m.errorf("trylock", m.err)
	}
	return m.tryLock(ctx, 0)
}

// tryLock is TryLock (or TryLockFor, with lease > 0) after the argument
// checks.
func (m *Mutex) tryLock(ctx context.Context, lease time.Duration) (bool, error) {
	begin := time.Now()
	c := &call{op: "trylock", lease: lease, queued: make([]int8, len(m.owners))}
	res, err := m.attempt(ctx, c)
	// Refusals do not say by whom: several contenders that each got
	// fewer than a majority refuse one another as one owner with a
	// majority would. An attempt that got some masters met a free lock
	// there: a race, likely a split, worth another try.
	for splits := 1; err == nil && (res.split || res.some) && splits <= maxTrySplits; splits++ {
		if sleep(ctx, nil, backoff(splits, res.took)) != nil {
			break // ctx ended: the attempt's answer stands
		}
		res, err = m.attempt(ctx, c)
	}
	if err == nil && res.ok {
		m.acquired(ctx, c, begin)
	}
	m.failed(ctx, err, c, begin)
	return res.ok, err
}

// Unlock releases the lock on every master (in parallel). It returns nil
// when a majority confirmed the release. It returns an error matching
// relock.ErrNotHeld when the handle does not hold the lock (never locked,
// already unlocked) or lost it (see Lost; the error also matches the
// reason: relock.ErrLeaseExpired, relock.ErrLockGone or relock.ErrClosed),
// or when the releases show that fewer than a majority of the masters
// still had it. When too few masters answered to tell, it returns an error
// matching ErrNoQuorum. In every case the hold ends: what the masters
// that did not answer still keep expires within their lease (each
// master's own, see New).
//
// The release is not cancelled by ctx: it is sent and waited for even when
// ctx has ended (ctx's values are kept), until a majority confirmed (and
// then as long again for the others), for at most half the lease and 5 s
// (see New). The renewals of every master's part stop when Unlock is
// called, whatever its outcome.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.errorf("unlock", m.err)
	}
	ev, err := m.unlock(ctx)
	m.emit(ev) // with no lock of the handle held: observers may call it
	return err
}

func (m *Mutex) unlock(ctx context.Context) (*core.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.cur
	if h == nil {
		return nil, m.errorf("unlock", lockerr.NotHeld)
	}
	m.cur = nil
	state, since, lost := h.end()

	var idx []int
	for i, s := range state {
		if s == stHeld || s == stLost || s == stUnknown {
			idx = append(idx, i)
		}
	}
	id := m.nextID()
	// Sent and waited for whatever ctx says (detached from its
	// cancellation, bounded by the release timeout); those not waited for
	// still run after Unlock returns, each bounded the same way.
	wait := releaseTimeout(m.lease)
	rctx := context.WithoutCancel(ctx)
	rd := m.send(rctx, idx, wait, func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
		if state[i] == stUnknown {
			// Its acquire may still land: abort it, which also refuses
			// a late copy.
			n, err := m.abort(ctx, o, h.req, h.recordTTL(i))
			return []int64{n}, err
		}
		n, err := o.Run(ctx, scripts.MutexRelease, m.kkeys, m.token, id, h.recordTTL(i), noHandoff).Int64()
		return []int64{n}, err
	})
	got, _ := rd.collect(rctx, len(idx), wait, func(got []reply) (bool, bool) {
		k := 0
		for _, r := range got {
			if r.err == nil && r.val[0] == 1 {
				k++
			}
		}
		return k >= m.quorum, true
	})
	if lost != nil {
		return nil, m.errorf("unlock", lost)
	}

	released, notHeld := 0, 0 // notHeld: refused the acquire, or answered without the key
	var errs []error
	for _, s := range state {
		if s == stRefused {
			notHeld++
		}
	}
	replied := make([]bool, len(m.owners))
	for _, r := range got {
		replied[r.i] = true
		switch {
		case r.err != nil:
			errs = append(errs, m.masterErr(r.i, r.err))
		case r.val[0] == 1:
			released++
		default:
			notHeld++
		}
	}
	for _, i := range idx {
		if !replied[i] {
			errs = append(errs, m.masterErr(i, errNoReply(wait)))
		}
	}
	switch {
	case released >= m.quorum:
		if !m.observing() {
			return nil, nil
		}
		ev := m.event(core.EventReleased, nil)
		ev.Held = time.Since(since)
		return &ev, nil
	case notHeld > len(m.owners)-m.quorum:
		h.mu.Lock()
		h.loseLocked(lockerr.Gone, fmt.Sprintf("lock gone or taken on %d of %d masters", notHeld, len(m.owners)))
		cause := h.err
		ev := h.lostEvent()
		h.mu.Unlock()
		return ev, m.errorf("unlock", cause)
	}
	return nil, m.errorf("unlock", &quorumError{
		detail: fmt.Sprintf("released on %d of %d masters, %d needed%s; any other master that has it keeps it until its lease ends",
			released, len(m.owners), m.quorum, notHeldNote(notHeld)),
		errs: errs,
	})
}

// notHeldNote says on how many masters the hold was known not to be
// (they refused its acquire, or answered the release without its key).
func notHeldNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d did not have it)", n)
}

// Held reports whether this handle holds the lock now, as far as it
// knows: true from a successful Lock to its Unlock, unless the hold is
// known to be lost. A part past its local deadline is lost: if its
// watchdog's timer has not declared it yet (a timer fires late when the
// process is starved of CPU), Held declares it, as the timer would, and
// so Lost fires when that leaves fewer than a majority. Held never
// reports a hold that may have expired on a majority, and a hold it
// reported gone stays gone. It asks nothing of Redis.
func (m *Mutex) Held() bool {
	h := m.last.Load()
	if h == nil {
		return false
	}
	h.mu.Lock()
	held := !h.goneLocked()
	ev := h.lostEvent()
	h.mu.Unlock()
	m.emit(ev)
	return held
}

// Lost returns a channel that is closed when the current hold is lost: a
// majority of the masters can no longer be counted on to keep the lock
// (its keys were found gone or taken there, no renewal was confirmed by a
// majority before their local deadlines, the fixed lease ran out, or the
// Clients were closed). Work protected by the lock should stop when it
// fires. A hold that ends with Unlock is not lost, and its channel stays
// open. Before the first successful Lock it returns nil: a receive from it
// blocks forever (nothing held can be lost).
func (m *Mutex) Lost() <-chan struct{} {
	if h := m.last.Load(); h != nil {
		return h.lost
	}
	return nil
}

// LostErr returns why the most recent hold was lost, or nil if it was
// not: an error matching relock.ErrNotHeld and one of
// relock.ErrLeaseExpired, relock.ErrLockGone and relock.ErrClosed (the
// reason of the master loss that left fewer than a majority).
func (m *Mutex) LostErr() error {
	if h := m.last.Load(); h != nil {
		return h.Err()
	}
	return nil
}

// HoldContext returns a context derived from ctx that is cancelled when
// the current hold ends: when it is lost (fewer than a majority of its
// parts alive, see Lost), right after Lost fires, with LostErr's error
// as its cause (context.Cause: an error matching relock.ErrNotHeld and
// relock.ErrLeaseExpired, relock.ErrLockGone or relock.ErrClosed); and
// when Unlock is called, with cause context.Canceled, whatever the
// release's outcome. A part lost while a majority still holds does not
// cancel it. Pass it to the work the lock protects, so that the work
// stops when the hold does (relock.Do does this for you). When the handle
// holds nothing, the context is cancelled already (cause: an error
// matching relock.ErrNotHeld, or the loss of a hold not yet unlocked).
// Parts past their local deadline are lost (see Held): when that leaves
// fewer than a majority, HoldContext declares the loss (Lost fires) and
// returns a context ended with it. It asks nothing of the masters, and
// starts no goroutine.
func (m *Mutex) HoldContext(ctx context.Context) context.Context {
	h := m.last.Load()
	if m.err != nil || h == nil {
		return core.Ended(ctx, lockerr.NotHeld)
	}
	h.mu.Lock()
	h.goneLocked()
	ended, err := h.ended, h.err
	ev := h.lostEvent()
	h.mu.Unlock()
	m.emit(ev)
	switch {
	case err != nil:
		return core.Ended(ctx, err)
	case ended:
		return core.Ended(ctx, lockerr.NotHeld)
	}
	return h.scope.Context(ctx)
}

// Token returns the handle's owner token, the same on every master: the
// capability that holds and releases its lock, random unless the handle
// was made with relock.WithToken. Give it only to the code that should
// own what this handle holds (e.g. another process that resumes the
// hold, see Resume); relock never shows it in errors, logs, events or
// metrics.
func (m *Mutex) Token() string { return m.token }

// Fingerprint returns the handle's owner fingerprint: 8 hex digits of a
// hash of its token, as relock's events and logs show the owner. It is
// safe to log.
func (m *Mutex) Fingerprint() string { return core.Fingerprint(m.token) }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Kind returns the lock's type, "redlock" (see relock.Locker).
func (m *Mutex) Kind() string { return Kind }

var _ relock.Locker = (*Mutex)(nil)

// nextID returns a request id unique for this handle, the same on every
// master: numbered by the first master's owner, after a random prefix of
// the handle's own when its token was chosen (relock.WithToken), so that
// two handles of one token, which share a request record on each master,
// never send the same id. The caller holds m.mu.
func (m *Mutex) nextID() string { return m.owners[0].NextRequest() }

// partLease is the lease of master i's part of a hold taken with lease:
// that lease (LockFor), or else the handle's own there (WithLease, or the
// master's Client's watchdog timeout: see New).
func (m *Mutex) partLease(i int, lease time.Duration) time.Duration {
	if lease > 0 {
		return lease
	}
	return m.owners[i].Lease()
}

// recordTTL is how long (ms) a request record is kept on a master whose
// part has lease: long enough to cover go-redis's resends, never longer
// than the part (see core.MaxRecordTTL).
func recordTTL(lease time.Duration) int64 { return min(lease, core.MaxRecordTTL).Milliseconds() }

// abort undoes acquire req on one master: deletes the key if this owner
// has it there, and marks req aborted (for recMS milliseconds) so that a
// late copy of it is refused. It replies 1 when it deleted a key.
func (m *Mutex) abort(ctx context.Context, o *core.Owner, req string, recMS int64) (int64, error) {
	return o.Run(ctx, scripts.MutexAbort, m.kkeys, m.token, req, recMS, 0, noHandoff).Int64()
}

// usable returns the masters that can be asked, and why the others cannot
// (their Client was closed).
func (m *Mutex) usable() (idx []int, errs []error) {
	for i := range m.owners {
		if err := m.owners[i].Check(); err != nil {
			errs = append(errs, m.masterErr(i, err))
			continue
		}
		idx = append(idx, i)
	}
	return idx, errs
}

// masterErr names master i in err.
func (m *Mutex) masterErr(i int, err error) error {
	if a := addrOf(m.owners[i].E.RDB); a != "" {
		return fmt.Errorf("master %d (%s): %w", i, a, err)
	}
	return fmt.Errorf("master %d: %w", i, err)
}

func errNoReply(d time.Duration) error {
	return fmt.Errorf("no reply within %v", d)
}

// errorf wraps err with the operation and the lock's name:
// `redlock: lock "orders:42": ...`.
func (m *Mutex) errorf(op string, err error) error {
	return fmt.Errorf("%s: %s %q: %w", Kind, op, m.name, err)
}

// quorumError is an ErrNoQuorum with the masters' errors.
type quorumError struct {
	detail string
	errs   []error
	lock   bool // from Lock: also matches relock.ErrNotObtained
}

func (e *quorumError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNoQuorum.Error())
	b.WriteString(": ")
	b.WriteString(e.detail)
	for _, err := range e.errs {
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *quorumError) Is(target error) bool {
	return target == ErrNoQuorum || (e.lock && target == lockerr.NotObtained)
}

func (e *quorumError) Unwrap() []error { return e.errs }

// Events go to the observers of the first master's Client.
func (m *Mutex) observing() bool { return m.owners[0].E.Observing() }

func (m *Mutex) event(t core.EventType, err error) core.Event {
	return core.Event{Type: t, Kind: Kind, Name: m.name, Owner: core.Fingerprint(m.token), Err: err}
}

func (m *Mutex) emit(ev *core.Event) {
	if ev != nil {
		m.owners[0].E.Emit(*ev)
	}
}

// acquired reports a new hold, taken by call c (nil: a Resume) with ctx,
// which began at begin.
func (m *Mutex) acquired(ctx context.Context, c *call, begin time.Time) {
	if m.observing() {
		ev := m.event(core.EventAcquired, nil)
		ev.Wait = time.Since(begin)
		if c != nil {
			ev.Attempts, ev.Ctx = c.tries, ctx
		}
		m.emit(&ev)
	}
}

// failed reports acquire call c, with ctx, that began at begin and
// returned err, if it did.
func (m *Mutex) failed(ctx context.Context, err error, c *call, begin time.Time) {
	if err != nil && m.observing() {
		ev := m.event(core.EventFailed, err)
		ev.Wait, ev.Attempts, ev.Ctx = time.Since(begin), c.tries, ctx
		m.emit(&ev)
	}
}

// newWaitID returns 64 random bits in hex: the id of a blocking call's
// queue entries.
func newWaitID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Package mutex provides a plain distributed mutex on Redis: one owner at a
// time, not reentrant.
//
// The lock is one Redis string, relock:mutex:{name}, holding the owner's
// random token, set with its lease in one atomic step only if absent: a
// native SET NX PX when the lock is free (a script when it is not, or with
// fencing). Release compares the token and deletes in one atomic step (a
// script), and publishes a wake-up (or hands the lock over, below). An
// uncontended Lock+Unlock costs exactly two Redis commands.
//
// The native SET has one cost, in a double fault only: if the server stalls
// past the client's read timeout while a Lock gives up, a copy of the SET
// still queued on an abandoned connection may run after the Lock has cleaned
// up, and then holds the lock for nobody until its lease ends. Safety is not
// affected (no two owners ever hold it); waiters are delayed by at most one
// lease. Locks with relock.WithFencing always use the script, which refuses
// such a late copy.
// Without WithLease, the Client's watchdog renews the lease while the lock
// is held.
//
// The mutex is not fair, like sync.Mutex: a release wakes one waiter per
// Client, and any owner may win the next acquire, including the one that
// just released it, until the longest waiter has waited 2 ms
// (sync.Mutex: 1 ms). From then on the release hands the lock to that
// waiter directly (the release script makes it the owner and pushes it the
// grant) and newcomers may not take it, so no waiter starves. Use package
// fair when waiters must be served in arrival order.
//
// Mutual exclusion holds only while Redis keeps the key and the holder acts
// before its local deadline; see the relock package documentation for the
// exact guarantees, and relock.WithFencing for protecting a resource beyond
// them.
package mutex

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Mutex is a handle on a named distributed mutex. The handle is the owner:
// it carries a random 128-bit owner token, and only this handle can unlock
// what it locked. Two handles never share ownership, even for the same name
// in one process; goroutines sharing one handle share its hold.
//
// A Mutex is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type Mutex struct {
	x *core.Exclusive
}

// New returns a handle on the mutex called name. It never fails: an invalid
// name or option, or a nil client, is reported by every call, as an error
// matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient. Names are used verbatim inside the key's hash tag;
// see relock.ErrInvalidName for the few names refused.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Mutex {
	o := core.NewOwner(c, "mutex", name, core.Options(opts))
	return &Mutex{x: core.NewExclusive(o, core.Scripts{
		Acquire: scripts.MutexAcquire,
		Release: scripts.MutexRelease,
		Abort:   scripts.MutexAbort,
		Leave:   scripts.MutexLeave,
		SetNX:   true,
	}, false, watchdog.KindString, core.Extension{})}
}

// Lock acquires the mutex, waiting until it is free or ctx ends. It makes
// one attempt at once; while the lock is held elsewhere it waits for the
// holder's release (pushed through the Client's shared subscription) or
// the holder's lease to run out, whichever comes first.
//
// On ctx end it returns an error matching both relock.ErrNotObtained and
// ctx.Err(), and leaves nothing behind but a short-lived request record (if
// an attempt was in flight and did take the lock, it is released; the record
// refuses a late copy of that attempt, and expires within the lease). A
// Redis error (unreachable, a timeout) ends the wait too: it returns that
// error after the same clean-up (what a Redis that does not answer keeps of
// the attempt expires on its own, within the lease); call it again to wait
// again. Lock on a handle that already holds the mutex returns
// relock.ErrAlreadyHeld at once; after its hold was lost, Lock returns
// relock.ErrNotHeld until Unlock has reported the loss (see "When a hold is
// lost" in package relock).
func (m *Mutex) Lock(ctx context.Context) error { return m.x.Lock(ctx, "lock", 0, false) }

// LockFor is Lock for a hold with a lease of its own (Redisson's
// lock(leaseTime)): the mutex expires lease after it was acquired unless
// it is unlocked or extended first, and the watchdog does not renew it, as
// with relock.WithLease but for this hold only. lease must lie in [10ms,
// 7 days]; otherwise LockFor returns an error matching
// relock.ErrInvalidOption at once.
func (m *Mutex) LockFor(ctx context.Context, lease time.Duration) error {
	return m.x.Lock(ctx, "lock", lease, true)
}

// TryLockFor is TryLock with LockFor's lease.
func (m *Mutex) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return m.x.TryLock(ctx, "trylock", lease, true)
}

// TryLock makes one attempt: (true, nil) if it took the mutex, (false, nil)
// if another owner holds it. It never waits for the lock.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	return m.x.TryLock(ctx, "trylock", 0, false)
}

// Unlock releases the mutex if this handle holds it, and wakes a waiter.
// It returns an error matching relock.ErrNotHeld if the handle does not
// hold it (never locked, already unlocked, or lost: see Lost); the current
// owner's lock is never touched. If the reply is lost (a network error),
// the error says so and calling Unlock again is safe: it repeats the same
// request, which Redis answers as it did the first time.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals of the hold stop when Unlock is called, so a release whose
// outcome cannot be known (Redis unreachable) ends with the lease at the
// latest.
func (m *Mutex) Unlock(ctx context.Context) error { return m.x.Unlock(ctx) }

// Extend sets the remaining lease of the current hold to d, in one
// script call that checks that this handle still holds the mutex (it
// never recreates a lost lock, nor touches another owner's):
//
//   - a hold with a fixed lease (relock.WithLease, LockFor) gets d as its
//     lease: the mutex expires d from now (sooner or later than before)
//     unless unlocked or extended again, and Lost fires then;
//   - a hold the watchdog renews is renewed now: it has at least d left,
//     and the watchdog keeps it at max(d, its timeout) from then on, so
//     a pause of this process of up to d cannot lose it.
//
// d must lie in [10ms, 7 days] (relock.ErrInvalidOption). When the handle
// does not hold the mutex (never locked, unlocked, lost, or past its local
// deadline: see Held) Extend returns an error matching relock.ErrNotHeld
// and sends nothing; when Redis no longer has the hold as this handle's,
// the hold is lost (Lost fires) and the error matches relock.ErrNotHeld
// and relock.ErrLockGone. The lease is set absolutely, so a copy that
// Redis runs twice (go-redis resends a command whose reply timed out)
// leaves the same lease. When Redis is unreachable it returns the error
// and the hold keeps the deadline it had, or the new lease's if that is
// sooner (Redis may have applied it). WithSyncReplicas, an extension the
// replicas do not confirm stands at the master only: Extend returns an
// error matching relock.ErrNotReplicated (or the ctx's error, if ctx ends
// first: within 100 ms of a cancellation) and the deadline is as when
// Redis is unreachable.
func (m *Mutex) Extend(ctx context.Context, d time.Duration) error {
	return m.x.Extend(ctx, "extend", d)
}

// HoldContext returns a context derived from ctx that is cancelled when
// the current hold ends: when it is lost, right after Lost fires, with
// LostErr's error as its cause (context.Cause: an error matching
// relock.ErrNotHeld and relock.ErrLeaseExpired, relock.ErrLockGone or
// relock.ErrClosed); and when Unlock is called, with cause
// context.Canceled. Pass it to the work the lock protects, so that the
// work stops when the hold does (relock.Do does this for you). When the
// handle holds nothing, the context is cancelled already (cause: an error
// matching relock.ErrNotHeld). Past the hold's local deadline the hold
// is lost: HoldContext declares it, as Held does (Lost fires), and returns
// a context ended with that loss. No goroutine waits on it: the hold ends
// it, and the handle forgets it once it is done (ctx ended, say), so a
// long hold may make one per request.
func (m *Mutex) HoldContext(ctx context.Context) context.Context { return m.x.HoldContext(ctx) }

// Resume adopts the hold that the handle's owner token has in Redis: a
// handle made with relock.WithToken takes over the hold of another handle
// of that token (in another process, or before a restart). It then holds
// the mutex as if it had locked it (with its fencing token): Unlock
// releases it, Lost and HoldContext report its loss. Without a fixed
// lease, the hold is renewed at once to the watchdog timeout, and by the
// watchdog from then on; with relock.WithLease, its lease runs on from
// where it is. The hold keeps the metadata it was taken with
// (relock.WithMetadata of the handle that locked it), which Holders and
// the relock command show. One script call.
//
// It returns an error matching relock.ErrNotHeld, and changes nothing,
// when the token holds nothing (never locked, released, expired, or taken
// by another owner), and relock.ErrAlreadyHeld when this handle holds the
// mutex. When Redis is unreachable it returns the error, and the handle
// holds nothing.
func (m *Mutex) Resume(ctx context.Context) error { return m.x.Resume(ctx, "resume") }

// Run runs s with keys and args atomically with a check, in the same
// script call at Redis, that this handle still holds the mutex: a write
// guarded by the hold (see relock.Script). When the handle does not hold
// it at Redis (a stale holder: its lease ran out while it was paused, and
// another owner may hold the lock now), s does not run, the hold is lost
// (Lost fires) and the command's error matches relock.ErrNotHeld and
// relock.ErrLockGone; a handle that knows it holds nothing sends nothing
// and the error matches relock.ErrNotHeld; past its local deadline the
// hold is lost, Run declares it as Held does (Lost fires) and sends
// nothing, and the error also matches relock.ErrLeaseExpired.
// On a Redis Cluster each key must be in the mutex's slot (the lock's hash
// tag {name} in the key), or the error matches relock.ErrInvalidOption.
// Otherwise the command is s's reply, or its error.
func (m *Mutex) Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd {
	return m.x.RunGuarded(ctx, "run", core.GuardedOf(s), keys, args...)
}

// Holders returns who holds the mutex now, as anybody can see it (a
// handle of the name need not hold it): its owner's fingerprint, metadata
// (relock.WithMetadata) and remaining lease; none when it is free. One
// script call (HGETALL of a hash for the other lock types).
func (m *Mutex) Holders(ctx context.Context) ([]relock.Holder, error) {
	if err := m.x.Check(); err != nil {
		return nil, m.x.Errorf("holders", err)
	}
	hs, err := inspect.Holders(ctx, m.x.E.RDB, m.x.Kind, m.x.Name)
	if err != nil {
		return nil, m.x.Errorf("holders", err)
	}
	return hs, nil
}

// Token returns the handle's owner token: the capability that holds and
// releases its locks, random unless the handle was made with
// relock.WithToken. Give it only to the code that should own what this
// handle holds (e.g. another process that resumes the hold, see
// relock.WithToken); relock never shows it in errors, logs, events or
// metrics.
func (m *Mutex) Token() string { return m.x.Token }

// Fingerprint returns the handle's owner fingerprint: 8 hex digits of a
// hash of its token, as relock's events, logs and the relock command show
// the owner. It is safe to log.
func (m *Mutex) Fingerprint() string { return core.Fingerprint(m.x.Token) }

// Held reports whether this handle holds the mutex now, as far as it knows:
// true from a successful Lock to its Unlock, unless the hold is lost (see
// Lost): past its local deadline it is, and Held declares it if the
// watchdog, late, has not yet. It asks nothing of Redis.
func (m *Mutex) Held() bool { return m.x.Held(core.Units) > 0 }

// IsLocked reports whether any handle holds the mutex (one EXISTS).
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.x.IsLocked(ctx) }

// RemainingLease returns how long the mutex has before it expires unless
// renewed (one PTTL), or 0 when nobody holds it.
func (m *Mutex) RemainingLease(ctx context.Context) (time.Duration, error) {
	return m.x.RemainingLease(ctx)
}

// ForceUnlock deletes the mutex whatever its owner and wakes its waiters,
// whose next attempt then succeeds at once; it reports whether there was a
// lock to delete. It is meant for operators (a lock stuck after a bug).
// The former holder learns it at its watchdog's next renewal (within a
// third of the watchdog timeout; with a fixed lease, at its local
// deadline): its Lost channel fires and its Unlock returns an error
// matching relock.ErrNotHeld.
//
// It is one script call, applied once: when its reply is lost and
// go-redis sends it again (or the handle does, after a Redis Cluster
// refused it while the lock's slot moved), the second run answers as the
// first did, and never deletes the hold of an owner that took the lock
// meanwhile (such as the waiter it woke). Its request leaves a record
// under the lock's hash tag, which expires after 15 s. If Redis cannot be
// reached it returns the error, and whether the lock was deleted is
// unknown; calling ForceUnlock again is a new request, which deletes the
// lock as it is then, whoever holds it. To delete only the hold of the
// owner you saw, use the relock command's force-unlock (cmd/relock).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return force.Any(ctx, &m.x.Owner) }

// LostErr returns why the handle's most recent hold was lost, or nil if it
// was not lost: an error matching relock.ErrNotHeld and exactly one of
// relock.ErrLeaseExpired (the lease ran out: a fixed lease ended, or no
// renewal was confirmed in time), relock.ErrLockGone (the key was deleted
// or taken behind the holder's back, e.g. by ForceUnlock) and
// relock.ErrClosed (the Client was closed).
func (m *Mutex) LostErr() error { return m.x.LostErr() }

// Lost returns a channel that is closed when the current hold is lost: the
// lease ran out, the key was deleted or taken behind the holder's back, no
// renewal was confirmed before the local deadline, or the Client was
// closed. Work protected by the lock should stop when it fires. A hold that
// ends with Unlock is not lost, and its channel stays open. Before the first
// successful Lock it returns nil: a receive from it blocks forever (nothing
// held can be lost).
func (m *Mutex) Lost() <-chan struct{} { return m.x.Lost() }

// Fence returns the fencing token of the current hold (see
// relock.WithFencing), or 0 when the handle holds nothing or fencing is off.
func (m *Mutex) Fence() int64 { return m.x.Fence() }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.x.Name }

// Kind returns the lock's type, "mutex" (see relock.Locker).
func (m *Mutex) Kind() string { return m.x.Kind }

var _ relock.Locker = (*Mutex)(nil)

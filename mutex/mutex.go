// Package mutex provides a plain distributed mutex on Redis: one owner at a
// time, not reentrant.
//
// The lock is one Redis string, relock:mutex:{name}, holding the owner's
// random token, set with its lease in one atomic step only if absent: a
// native SET NX PX when the lock is free (a script when it is not, or with
// fencing). Release compares the token and deletes in one atomic step (a
// script), and publishes a wake-up. An uncontended Lock+Unlock costs exactly
// two Redis commands.
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
// The mutex is not fair: a release wakes one waiter per Client, and any
// owner may win the next acquire, including the one that just released it.
// Use package fair when waiters must be served in arrival order.
//
// Mutual exclusion holds only while Redis keeps the key and the holder acts
// before its local deadline; see the relock package documentation for the
// exact guarantees, and relock.WithFencing for protecting a resource beyond
// them.
package mutex

import (
	"context"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
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
// ctx.Err(), and leaves nothing behind (if an attempt was in flight and did
// take the lock, it is released). Lock on a handle that already holds the
// mutex returns relock.ErrAlreadyHeld at once; after its hold was lost,
// Lock returns relock.ErrNotHeld until Unlock has reported the loss (see
// "When a hold is lost" in package relock).
func (m *Mutex) Lock(ctx context.Context) error { return m.x.Lock(ctx) }

// TryLock makes one attempt: (true, nil) if it took the mutex, (false, nil)
// if another owner holds it. It never waits for the lock.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) { return m.x.TryLock(ctx) }

// Unlock releases the mutex if this handle holds it, and wakes a waiter.
// It returns an error matching relock.ErrNotHeld if the handle does not
// hold it (never locked, already unlocked, or lost: see Lost); the current
// owner's lock is never touched. If the reply is lost (a network error),
// the error says so and calling Unlock again is safe: it repeats the same
// request, which Redis answers as it did the first time.
func (m *Mutex) Unlock(ctx context.Context) error { return m.x.Unlock(ctx) }

// Held reports whether this handle holds the mutex now, as far as it knows:
// true from a successful Lock to its Unlock, unless the hold is known to be
// lost (see Lost). It asks nothing of Redis.
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
// ends with Unlock is not lost, and its channel stays open. Before the
// first successful Lock it returns nil.
func (m *Mutex) Lost() <-chan struct{} { return m.x.Lost() }

// Fence returns the fencing token of the current hold (see
// relock.WithFencing), or 0 when the handle holds nothing or fencing is off.
func (m *Mutex) Fence() int64 { return m.x.Fence() }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.x.Name }

// Kind returns the lock's type, "mutex" (see relock.Locker).
func (m *Mutex) Kind() string { return m.x.Kind }

var _ relock.Locker = (*Mutex)(nil)

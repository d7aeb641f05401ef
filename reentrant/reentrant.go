// Package reentrant provides a distributed reentrant lock on Redis with
// Redisson RLock semantics: the handle that holds it may lock it again
// (nested critical sections) and holds it until it has unlocked as many
// times as it locked.
//
// The lock is one Redis hash, relock:reentrant:{name}, whose only field is
// the holder's owner token with its hold count as value, and whose TTL is
// the lease. Every lock and partial unlock resets the lease to its full
// length; the final unlock deletes the hash and wakes one waiter (or hands
// the lock over, below). Without
// relock.WithLease, the Client's watchdog renews the lease while the lock
// is held, registering the hold once (not once per re-entry).
//
// The lock is not fair: any owner may win the next acquire, including the
// one that just released it, until the longest waiter has waited 2 ms;
// then the final unlock hands the lock to that waiter directly (as
// package mutex does) and newcomers may not take it. Use package fair for
// arrival order.
//
// Ownership is per handle, not per goroutine (Go has no goroutine
// identity): every goroutine using one handle shares its hold. Give each
// independent worker its own handle.
//
// See the relock package documentation for the guarantees and their
// limits.
package reentrant

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

// Lock is a handle on a named reentrant lock. The handle is the owner: it
// carries a random 128-bit owner token.
//
// A Lock is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type Lock struct {
	x *core.Exclusive
}

// New returns a handle on the reentrant lock called name. It never fails:
// an invalid name or option, or a nil client, is reported by every call, as
// an error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Lock {
	o := core.NewOwner(c, "reentrant", name, core.Options(opts))
	return &Lock{x: core.NewExclusive(o, core.Scripts{
		Acquire: scripts.ReentrantAcquire,
		Release: scripts.ReentrantRelease,
		Abort:   scripts.ReentrantAbort,
		Leave:   scripts.ReentrantLeave,
	}, true, watchdog.KindHash, core.Extension{})}
}

// Lock acquires the lock, or re-enters it if this handle holds it, waiting
// until it is free or ctx ends. Each call resets the lease to its full
// length.
//
// On ctx end it returns an error matching both relock.ErrNotObtained and
// ctx.Err(), and the hold count is as before the call. A Redis error
// (unreachable, a timeout) ends the wait too: it returns that error after
// the same clean-up (what a Redis that does not answer keeps of the attempt
// expires on its own, within the lease); call it again to wait again. A
// re-entry on a hold that was lost (see Lost), or past its local deadline
// (see Held), returns an error matching relock.ErrNotHeld: the outer
// critical section is no longer protected. A re-entry that Redis granted
// but whose reply came after the hold was declared lost returns that loss
// too (see "When a hold is lost" in package relock). Such
// a handle refuses every Lock until it has been unlocked as many times as it
// was locked (see "When a hold is lost" in package relock).
func (l *Lock) Lock(ctx context.Context) error { return l.x.Lock(ctx, "lock", 0, false) }

// LockFor is Lock for a hold with a lease of its own (see
// mutex.Mutex.LockFor). On a re-entry it sets the hold's lease as Extend
// does.
func (l *Lock) LockFor(ctx context.Context, lease time.Duration) error {
	return l.x.Lock(ctx, "lock", lease, true)
}

// TryLockFor is TryLock with LockFor's lease.
func (l *Lock) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return l.x.TryLock(ctx, "trylock", lease, true)
}

// TryLock makes one attempt to acquire or re-enter: (true, nil) on success,
// (false, nil) if another owner holds the lock.
func (l *Lock) TryLock(ctx context.Context) (bool, error) {
	return l.x.TryLock(ctx, "trylock", 0, false)
}

// Unlock gives back one hold. A partial unlock keeps the lock and resets
// its lease; the final one deletes it and wakes a waiter. Without a hold
// (never locked, fully unlocked, lost, or another owner's) it returns an
// error matching relock.ErrNotHeld and changes nothing. If the reply is lost
// (a network error), calling Unlock again is safe: it repeats the same
// request, which is counted once.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals of the hold stop when the final Unlock is called, so one whose
// outcome cannot be known (Redis unreachable) ends with its lease at the
// latest.
func (l *Lock) Unlock(ctx context.Context) error { return l.x.Unlock(ctx) }

// HoldCount returns how many holds this handle has on the lock according
// to Redis: N after N locks not yet unlocked, 0 for any other handle.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	return l.x.HashCount(ctx, l.x.Token)
}

// IsLocked reports whether any handle holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.x.IsLocked(ctx) }

// RemainingLease returns how long the lock has before it expires unless
// renewed or re-entered, or 0 when nobody holds it.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.x.RemainingLease(ctx)
}

// ForceUnlock deletes the lock whatever its owner and wakes its waiters,
// whose next attempt then succeeds at once; it reports whether there was a
// lock to delete. It is meant for operators (a lock stuck after a bug).
// The former holder learns it at its watchdog's next renewal (within a
// third of the watchdog timeout; with a fixed lease, at its local
// deadline): its Lost channel fires and its Unlock returns an error
// matching relock.ErrNotHeld. It is applied once even when resent after a
// lost reply, and what a network error leaves unknown, is as for
// mutex.Mutex.ForceUnlock.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return force.Any(ctx, &l.x.Owner) }

// Held reports whether this handle holds the lock now, as far as it
// knows: true from a successful Lock to the matching final Unlock, unless
// the hold is lost (see Lost): past its local deadline it is, and Held
// declares it if the watchdog, late, has not yet. It asks nothing of Redis.
func (l *Lock) Held() bool { return l.x.Held(core.Units) > 0 }

// Extend sets the remaining lease of the current hold (all of its
// re-entries) to d (see mutex.Mutex.Extend).
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	return l.x.Extend(ctx, "extend", d)
}

// HoldContext returns a context derived from ctx that is cancelled when
// the current hold ends: lost, or released by the final Unlock (see
// mutex.Mutex.HoldContext).
func (l *Lock) HoldContext(ctx context.Context) context.Context { return l.x.HoldContext(ctx) }

// Resume adopts the hold that the handle's owner token has in Redis, with
// its re-entry count (see mutex.Mutex.Resume): HoldCount then says how
// many Unlocks end it.
func (l *Lock) Resume(ctx context.Context) error { return l.x.Resume(ctx, "resume") }

// Run runs s atomically with a check that this handle still holds the
// lock (see mutex.Mutex.Run and relock.Script).
func (l *Lock) Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd {
	return l.x.RunGuarded(ctx, "run", core.GuardedOf(s), keys, args...)
}

// Holders returns who holds the lock now, as anybody can see it
// (see mutex.Mutex.Holders).
func (l *Lock) Holders(ctx context.Context) ([]relock.Holder, error) {
	if err := l.x.Check(); err != nil {
		return nil, l.x.Errorf("holders", err)
	}
	hs, err := inspect.Holders(ctx, l.x.E.RDB, l.x.Kind, l.x.Name)
	if err != nil {
		return nil, l.x.Errorf("holders", err)
	}
	return hs, nil
}

// Token returns the handle's owner token (see mutex.Mutex.Token).
func (l *Lock) Token() string { return l.x.Token }

// Fingerprint returns the handle's owner fingerprint (see
// mutex.Mutex.Fingerprint).
func (l *Lock) Fingerprint() string { return core.Fingerprint(l.x.Token) }

// LostErr returns why the handle's most recent hold was lost (see
// mutex.Mutex.LostErr), or nil if it was not lost.
func (l *Lock) LostErr() error { return l.x.LostErr() }

// Lost returns a channel closed when the current hold is lost (see
// mutex.Mutex.Lost). Before the first successful Lock it returns nil: a
// receive from it blocks forever (nothing held can be lost).
func (l *Lock) Lost() <-chan struct{} { return l.x.Lost() }

// Fence returns the fencing token of the current hold (the same for every
// re-entry; see relock.WithFencing), or 0 when the handle holds nothing or
// fencing is off.
func (l *Lock) Fence() int64 { return l.x.Fence() }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.x.Name }

// Kind returns the lock's type, "reentrant" (see relock.Locker).
func (l *Lock) Kind() string { return l.x.Kind }

var _ relock.Locker = (*Lock)(nil)

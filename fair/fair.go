// Package fair provides a distributed fair lock on Redis: waiters are
// granted the lock strictly in the order they joined its queue at Redis,
// and the lock is reentrant per handle like package reentrant.
//
// Data, all under the lock's {name} hash tag: the reentrant hash
// relock:fair:{name} (owner token -> hold count, TTL = lease), the queue,
// a sorted set relock:fair:{name}:queue (waiter -> arrival, the server's
// time), and a sorted set relock:fair:{name}:timeouts (waiter -> the
// server time by which it must show it is alive again).
//
// Where Redisson's fair lock goes wrong, and what this one does instead:
//   - deadlines come from the server's clock (TIME inside the scripts),
//     never from the clients' clocks;
//   - a live waiter is never dropped, however long it waits: it refreshes
//     its own deadline (a heartbeat) several times per heartbeat timeout;
//   - a dead waiter (its process killed) is dropped once its deadline
//     passes, so it delays the queue by about one heartbeat timeout
//     (relock.WithHeartbeat, default 5 s), not minutes;
//   - scripts never scan the queue: only dead waiters at its head are
//     dropped, each once, and a waiter that gives up removes its own
//     entries (O(log n) in the queue's length).
//
// A blocking Lock joins the queue once, on its first attempt; TryLock never
// joins it (and so fails while anyone is queued, even if the lock is free
// for a moment). A waiter whose ctx ends leaves the queue at once, and the
// ones behind it move up without delay. Release wakes only the head of the
// queue, on a channel of its own; as everywhere in relock, a bounded timer
// backs every wait up.
//
// See the relock package documentation for the guarantees and their
// limits.
package fair

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

// Lock is a handle on a named fair lock. The handle is the owner: it
// carries a random 128-bit owner token and keeps one place in the queue
// while it waits.
//
// A Lock is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type Lock struct {
	x      *core.Exclusive
	prefix string // of the waiters' own channels
}

// New returns a handle on the fair lock called name. It never fails: an
// invalid name or option, or a nil client, is reported by every call, as an
// error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient. relock.WithHeartbeat sets the waiters' heartbeat
// timeout.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Lock {
	o := core.NewOwner(c, "fair", name, core.Options(opts))
	prefix := o.Keys.WaitPrefix()
	l := &Lock{prefix: prefix}
	l.x = core.NewExclusive(o, core.Scripts{
		Acquire: scripts.FairAcquire,
		Release: scripts.FairRelease,
		Abort:   scripts.FairAbort,
		Leave:   scripts.FairLeave,
	}, true, watchdog.KindHash, core.Extension{
		Channel: prefix + o.Token,
		// Each attempt is the waiter's heartbeat: several per timeout.
		MaxWait: min(o.Heartbeat()/4, core.MaxWait),
	})
	return l
}

// Lock acquires the lock (or re-enters it if this handle holds it), joining
// the queue and waiting for its turn until ctx ends. On ctx end it returns
// an error matching both relock.ErrNotObtained and ctx.Err(), and the handle
// has left the queue. A Redis error (unreachable, a timeout) ends the wait
// too: it returns that error after the same clean-up (what a Redis that does
// not answer keeps of the attempt expires on its own, within the lease);
// call it again to wait again. Like package reentrant's Lock, it refuses a
// re-entry on a lost hold, and every acquire until the lost holds have been
// unlocked, with relock.ErrNotHeld.
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

// TryLock makes one attempt without joining the queue: (true, nil) if it
// acquired or re-entered, (false, nil) if the lock is held or others are
// queued for it.
func (l *Lock) TryLock(ctx context.Context) (bool, error) {
	return l.x.TryLock(ctx, "trylock", 0, false)
}

// Unlock gives back one hold; the final one wakes the head of the queue.
// Without a hold it returns an error matching relock.ErrNotHeld and changes
// nothing. Calling it again after a network error is safe.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals of the hold stop when the final Unlock is called, so one whose
// outcome cannot be known (Redis unreachable) ends with its lease at the
// latest.
func (l *Lock) Unlock(ctx context.Context) error { return l.x.Unlock(ctx) }

// HoldCount returns this handle's hold count according to Redis (0 for any
// handle that does not hold the lock).
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	return l.x.HashCount(ctx, l.x.Token)
}

// IsLocked reports whether any handle holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.x.IsLocked(ctx) }

// RemainingLease returns how long the lock has before it expires unless
// renewed, or 0 when nobody holds it.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.x.RemainingLease(ctx)
}

// ForceUnlock deletes the lock whatever its owner and wakes the head of
// its queue, whose next attempt then succeeds at once; it reports whether
// there was a lock to delete. It is meant for operators (a lock stuck
// after a bug). The former holder learns it at its watchdog's next renewal
// (within a third of the watchdog timeout; with a fixed lease, at its
// local deadline): its Lost channel fires and its Unlock returns an error
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

// Fence returns the fencing token of the current hold (see
// relock.WithFencing), or 0 when the handle holds nothing or fencing is off.
func (l *Lock) Fence() int64 { return l.x.Fence() }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.x.Name }

// Kind returns the lock's type, "fair" (see relock.Locker).
func (l *Lock) Kind() string { return l.x.Kind }

var _ relock.Locker = (*Lock)(nil)

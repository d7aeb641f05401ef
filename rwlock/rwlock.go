// Package rwlock provides a distributed read/write lock on Redis with the
// semantics of sync.RWMutex: many handles may hold it for reading at once,
// or one handle for writing, and a waiting writer is never starved by
// readers.
//
// The lock is a Redis hash, relock:rwlock:{name}, with each owner handle's
// read and write counts (and the writer's token), and a sorted set
// relock:rwlock:{name}:owners of each owner's expiry (server time). Each
// handle's holds carry their own lease, so the share of a reader that
// crashed expires on its own however many other readers come and go; both
// keys live as long as the longest live hold and disappear with the last
// one. Every call does O(log n) work in the number n of handles holding
// the lock (expired owners are found by score, the longest hold by rank),
// never a scan of the hash. Without relock.WithLease, the Client's
// watchdog renews a handle's holds (and only its own) while it holds
// anything.
//
// Reads and writes are reentrant per handle. A handle holding the write
// lock may also take reads (a downgrade): once it unlocks the write, it
// keeps its reads and other handles may read too. A handle holding only
// reads that asks for the write lock gets relock.ErrUpgrade at once instead
// of deadlocking with itself.
//
// Writer preference and hand-over: a writer that has to wait joins the
// lock's queue of writers (relock:rwlock:{name}:queue and :timeouts,
// refreshed by each of its attempts: its heartbeat, relock.WithHeartbeat,
// default 5 s), and while one waits, new reads from other handles wait
// behind it; a handle that already holds a read re-enters it without
// waiting. Writers are served in arrival order: when the last hold ends,
// the release itself makes the longest-waiting writer the owner and pushes
// it the grant, so it starts without another round trip; a release of the
// write lock with no writer waiting wakes the waiting readers (a refused
// reader leaves a marker, relock:rwlock:{name}:readers, that lives a
// heartbeat: with no reader waiting nothing is published). Nobody else is
// woken. A waiting writer that crashes holds new readers back for at
// most its heartbeat, and a grant to a writer that died right after its
// last heartbeat blocks the lock for at most half a heartbeat (its claim
// lease).
//
// Ownership is per handle, not per goroutine (Go has no goroutine
// identity): every goroutine using one handle shares its holds, and two
// handles are two owners even in one goroutine. As with sync.RWMutex's
// recursive read locking, code holding a read through one handle must not
// wait for a read through another handle of the same lock: with a writer
// waiting, that deadlocks (until ctx ends).
//
// Limits: readers get no reserved turn between two writers, so a
// continuous stream of writers can delay readers. See the relock package
// documentation for the guarantees and their limits.
package rwlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/watchdog"
)

// RWMutex is a handle on a named distributed read/write lock. The handle is
// the owner: it carries a random 128-bit owner token, and only this handle
// can unlock what it locked. Two handles never share ownership, even for the
// same name in one process; goroutines sharing one handle share its holds.
//
// An RWMutex is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type RWMutex struct {
	h *core.Holder
	p *protocol
}

// New returns a handle on the read/write lock called name. It never fails:
// an invalid name or option, or a nil client, is reported by every call, as
// an error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient. The lock's keys differ from those of a mutex,
// reentrant or fair lock of the same name: they do not collide.
func New(c *relock.Client, name string, opts ...relock.LockOption) *RWMutex {
	o := core.NewOwner(c, "rwlock", name, core.Options(opts))
	l := &RWMutex{}
	l.h = core.NewHolder(o, nil, watchdog.KindRW, "read", "write")
	l.p = newProtocol(&l.h.Owner)
	l.h.Speak(l.p, l.p.owners)
	return l
}

// RLock takes a read hold, waiting until no other handle holds or waits
// for the write lock, or ctx ends. A handle that already holds a read, or
// the write lock, gets the read at once. Each call resets the lease of
// the handle's holds to its full length.
//
// On ctx end it returns an error matching both relock.ErrNotObtained and
// ctx.Err(), and the hold counts are as before the call. A Redis error
// (unreachable, a timeout) ends the wait too: it returns that error after
// the same clean-up (what a Redis that does not answer keeps of the attempt
// expires on its own, within the lease); call it again to wait again. A
// re-entry on holds that were lost (see Lost) returns an error matching
// relock.ErrNotHeld, and so does every acquire of the handle until it has
// been unlocked as many times as it was locked (see "When a hold is lost" in
// package relock).
func (l *RWMutex) RLock(ctx context.Context) error { return l.rlock(ctx, 0, false) }

// RLockFor is RLock for holds with a lease of their own: when the handle
// holds nothing yet, its holds get a fixed lease (see mutex.Mutex.LockFor);
// otherwise it sets the lease of the handle's holds as Extend does. A
// handle's read and write holds share one lease.
func (l *RWMutex) RLockFor(ctx context.Context, lease time.Duration) error {
	return l.rlock(ctx, lease, true)
}

func (l *RWMutex) rlock(ctx context.Context, lease time.Duration, fixed bool) error {
	if err := l.h.CheckAcquire(lease, fixed); err != nil {
		return l.errorf("rlock", err)
	}
	return l.h.Wait(ctx, "rlock", core.Read, 1, lease, core.WaitSpec{Channel: l.h.Keys.Channel})
}

// TryRLock makes one attempt to take a read hold: (true, nil) on success,
// (false, nil) if another handle holds or waits for the write lock.
func (l *RWMutex) TryRLock(ctx context.Context) (bool, error) { return l.tryRLock(ctx, 0, false) }

// TryRLockFor is TryRLock with RLockFor's lease.
func (l *RWMutex) TryRLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return l.tryRLock(ctx, lease, true)
}

func (l *RWMutex) tryRLock(ctx context.Context, lease time.Duration, fixed bool) (bool, error) {
	if err := l.h.CheckAcquire(lease, fixed); err != nil {
		return false, l.errorf("tryrlock", err)
	}
	return l.h.Try(ctx, "tryrlock", core.Read, 1, lease)
}

// RUnlock gives back one read hold. The handle's last hold (read or write)
// ends its lease at once and shrinks the lock's TTL to the longest hold
// left; if no hold is left, a waiting writer is woken. Without a read hold
// (never taken, all given back, or lost) it returns an error matching
// relock.ErrNotHeld and changes nothing. If the reply is lost (a network
// error), calling RUnlock again is safe: it repeats the same request.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals stop when the handle's last hold is given back, so one whose
// outcome cannot be known (Redis unreachable) ends with its lease at the
// latest.
func (l *RWMutex) RUnlock(ctx context.Context) error {
	return l.h.Release(ctx, "runlock", core.Read, 1)
}

// Lock takes the write lock, or re-enters it if this handle holds it,
// waiting until no other handle holds the lock or ctx ends. While it
// waits, new reads from other handles wait behind it. Each call resets the
// lease of the handle's holds to its full length.
//
// A handle that holds only read holds gets an error matching
// relock.ErrUpgrade at once. On ctx end it returns an error matching both
// relock.ErrNotObtained and ctx.Err(), withdraws from the waiting writers
// (waking the readers behind it) and leaves the hold counts as before.
func (l *RWMutex) Lock(ctx context.Context) error { return l.lock(ctx, 0, false) }

// LockFor is Lock with a lease as RLockFor's.
func (l *RWMutex) LockFor(ctx context.Context, lease time.Duration) error {
	return l.lock(ctx, lease, true)
}

func (l *RWMutex) lock(ctx context.Context, lease time.Duration, fixed bool) error {
	if err := l.h.CheckAcquire(lease, fixed); err != nil {
		return l.errorf("lock", err)
	}
	return l.h.Wait(ctx, "lock", core.Write, 1, lease, core.WaitSpec{
		Channel: l.h.Keys.Channel,
		// Each attempt is the waiting writer's heartbeat.
		MaxWait: min(l.h.Heartbeat()/4, core.MaxWait),
	})
}

// TryLock makes one attempt to take or re-enter the write lock: (true,
// nil) on success, (false, nil) if another handle holds the lock. It never
// registers as a waiting writer, so it does not hold readers back. A handle
// that holds only read holds gets an error matching relock.ErrUpgrade.
func (l *RWMutex) TryLock(ctx context.Context) (bool, error) { return l.tryLock(ctx, 0, false) }

// TryLockFor is TryLock with LockFor's lease.
func (l *RWMutex) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return l.tryLock(ctx, lease, true)
}

func (l *RWMutex) tryLock(ctx context.Context, lease time.Duration, fixed bool) (bool, error) {
	if err := l.h.CheckAcquire(lease, fixed); err != nil {
		return false, l.errorf("trylock", err)
	}
	return l.h.Try(ctx, "trylock", core.Write, 1, lease)
}

// Unlock gives back one write hold. The last one lets other handles in
// and wakes every waiter; read holds this handle took meanwhile are kept.
// Without a write hold it returns an error matching relock.ErrNotHeld and
// changes nothing. If the reply is lost (a network error), calling Unlock
// again is safe: it repeats the same request.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals stop when the handle's last hold is given back, so one whose
// outcome cannot be known (Redis unreachable) ends with its lease at the
// latest.
func (l *RWMutex) Unlock(ctx context.Context) error { return l.h.Release(ctx, "unlock", core.Write, 1) }

// ReadHoldCount returns how many read holds this handle has according to
// Redis: N after N read locks not yet unlocked, 0 for any other handle and
// once the holds have expired.
func (l *RWMutex) ReadHoldCount(ctx context.Context) (int, error) {
	r, _, err := l.counts(ctx)
	return r, err
}

// WriteHoldCount returns how many write holds this handle has according to
// Redis, like ReadHoldCount.
func (l *RWMutex) WriteHoldCount(ctx context.Context) (int, error) {
	_, w, err := l.counts(ctx)
	return w, err
}

// Held reports whether this handle holds the write lock now, as far as
// it knows: true from a successful Lock to the matching final Unlock,
// unless its holds are lost (see Lost): past their local deadline they
// are, and Held declares it if the watchdog, late, has not yet. It asks
// nothing of Redis.
func (l *RWMutex) Held() bool { return l.h.Held(core.Write) > 0 }

// RHeld reports whether this handle holds at least one read hold now, as
// far as it knows (see Held).
func (l *RWMutex) RHeld() bool { return l.h.Held(core.Read) > 0 }

// IsLocked reports whether any handle holds the lock, for reading or
// writing (one EXISTS: the lock's hash lives as long as its longest hold).
func (l *RWMutex) IsLocked(ctx context.Context) (bool, error) { return l.h.IsLocked(ctx) }

// RemainingLease returns how long the lock has before its longest hold
// expires unless renewed (one PTTL), or 0 when nobody holds it.
func (l *RWMutex) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.h.RemainingLease(ctx)
}

// ForceUnlock deletes the lock, every read and write hold of every owner,
// and wakes its waiters, whose next attempt then succeeds at once (a
// waiting writer's registration stays, so readers still wait behind it);
// it reports whether there was a lock to delete. It is meant for operators
// (a lock stuck after a bug). The former holders learn it at their
// watchdog's next renewal (within a third of the watchdog timeout; with a
// fixed lease, at their local deadline): their Lost channels fire and
// their unlocks return an error matching relock.ErrNotHeld. It is applied
// once even when resent after a lost reply (it never deletes the hold of
// a writer it granted the lock to, or of a reader it woke), and what a
// network error leaves unknown, is as for mutex.Mutex.ForceUnlock.
func (l *RWMutex) ForceUnlock(ctx context.Context) (bool, error) {
	return force.Any(ctx, &l.h.Owner)
}

// Extend sets the remaining lease of the handle's holds (read and write:
// they share one lease) to d (see mutex.Mutex.Extend).
func (l *RWMutex) Extend(ctx context.Context, d time.Duration) error {
	return l.h.Extend(ctx, "extend", d)
}

// HoldContext returns a context derived from ctx that is cancelled when
// the handle's current holds end: lost (read and write holds are lost
// together), or released by the handle's last RUnlock or Unlock (see
// mutex.Mutex.HoldContext).
func (l *RWMutex) HoldContext(ctx context.Context) context.Context { return l.h.HoldContext(ctx) }

// Resume adopts the holds that the handle's owner token has in Redis,
// read and write (see mutex.Mutex.Resume): ReadHoldCount and
// WriteHoldCount then say how many RUnlocks and Unlocks end them.
func (l *RWMutex) Resume(ctx context.Context) error { return l.h.Resume(ctx, "resume") }

// Run runs s atomically with a check that this handle still holds the
// write lock (see mutex.Mutex.Run and relock.Script): a write is guarded
// by the write lock. A handle that holds only read holds gets an error
// matching relock.ErrNotHeld, and s does not run.
func (l *RWMutex) Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd {
	return l.h.RunGuarded(ctx, "run", core.GuardedOf(s), keys, args...)
}

// Holders returns who holds the lock (its readers, or its writer with the reads it took) now, as anybody can see it
// (see mutex.Mutex.Holders).
func (l *RWMutex) Holders(ctx context.Context) ([]relock.Holder, error) {
	if err := l.h.Check(); err != nil {
		return nil, l.h.Errorf("holders", err)
	}
	hs, err := inspect.Holders(ctx, l.h.E.RDB, l.h.Kind, l.h.Name)
	if err != nil {
		return nil, l.h.Errorf("holders", err)
	}
	return hs, nil
}

// Token returns the handle's owner token (see mutex.Mutex.Token).
func (l *RWMutex) Token() string { return l.h.Token }

// Fingerprint returns the handle's owner fingerprint (see
// mutex.Mutex.Fingerprint).
func (l *RWMutex) Fingerprint() string { return core.Fingerprint(l.h.Token) }

// RLocker returns a relock.Locker whose Lock, TryLock and Unlock are this
// handle's RLock, TryRLock and RUnlock (as sync.RWMutex.RLocker does), for
// relock.Do and relock.MultiLock; its LockFor and TryLockFor (which
// MultiLock's LockFor uses) are RLockFor and TryRLockFor. Its other
// methods (Lost, LostErr, Extend, HoldContext, Token, Fingerprint...) are
// the handle's own.
func (l *RWMutex) RLocker() relock.Locker { return rlocker{l} }

// rlocker is the read side of an RWMutex as a relock.Locker.
type rlocker struct{ l *RWMutex }

func (r rlocker) Lock(ctx context.Context) error            { return r.l.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) (bool, error) { return r.l.TryRLock(ctx) }
func (r rlocker) Unlock(ctx context.Context) error          { return r.l.RUnlock(ctx) }
func (r rlocker) Lost() <-chan struct{}                     { return r.l.Lost() }
func (r rlocker) LostErr() error                            { return r.l.LostErr() }
func (r rlocker) Kind() string                              { return r.l.Kind() }
func (r rlocker) Name() string                              { return r.l.Name() }
func (r rlocker) Extend(ctx context.Context, d time.Duration) error {
	return r.l.Extend(ctx, d)
}
func (r rlocker) HoldContext(ctx context.Context) context.Context { return r.l.HoldContext(ctx) }
func (r rlocker) LockFor(ctx context.Context, lease time.Duration) error {
	return r.l.RLockFor(ctx, lease)
}
func (r rlocker) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return r.l.TryRLockFor(ctx, lease)
}
func (r rlocker) Token() string       { return r.l.Token() }
func (r rlocker) Fingerprint() string { return r.l.Fingerprint() }

// LostErr returns why the handle's most recent holds were lost (see
// mutex.Mutex.LostErr), or nil if they were not lost.
func (l *RWMutex) LostErr() error { return l.h.LostErr() }

// Lost returns a channel that is closed when the handle's current holds
// are lost: their lease ran out, the lock was deleted behind the holder's
// back, no renewal was confirmed before the local deadline, or the Client
// was closed. A handle's read and write holds are lost together. Holds
// that end by unlocking are not lost, and their channel stays open. Before
// the first successful acquire it returns nil: a receive from it blocks
// forever (nothing held can be lost).
func (l *RWMutex) Lost() <-chan struct{} {
	return l.h.Lost()
}

// Fence returns the fencing token of the current write hold (the same for
// every re-entry; see relock.WithFencing), or 0 when the handle does not
// hold the write lock or fencing is off. Read holds get no token.
func (l *RWMutex) Fence() int64 {
	return l.h.Fence(core.Write)
}

// Name returns the lock's name.
func (l *RWMutex) Name() string { return l.h.Name }

// Kind returns the lock's type, "rwlock" (see relock.Locker: an RWMutex
// is a Locker through its write lock).
func (l *RWMutex) Kind() string { return l.h.Kind }

var _ relock.Locker = (*RWMutex)(nil)

func (l *RWMutex) errorf(op string, err error) error {
	return fmt.Errorf("rwlock: %s %q: %w", op, l.h.Name, err)
}

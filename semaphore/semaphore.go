// Package semaphore provides a distributed weighted semaphore on Redis:
// a named pool of permits shared by every handle of that name, with the
// semantics of golang.org/x/sync/semaphore and permits that cannot leak.
//
// # Guarantees
//
//   - Capacity: the permits held by all handles of one name never exceed
//     the capacity (while Redis keeps the semaphore's keys and each holder
//     acts before its local deadline, as for every relock lock).
//   - Leases: the permits a handle holds are a lease owned by that handle.
//     Without relock.WithLease, the Client's watchdog renews them while
//     the handle holds any; a holder that crashes or whose Client closes
//     without releasing loses them within one lease (the watchdog
//     timeout, default 30 s), and they go to the waiters. (Redisson's
//     RSemaphore leaks them.) A handle learns that its permits were lost
//     on its Lost channel, as with the locks.
//   - FIFO without starvation: waiters are served in arrival order, and a
//     waiter whose request does not fit stops the queue: later waiters
//     wait behind it even if their smaller requests would fit, so a
//     request for many permits is not overtaken forever by requests for
//     few (x/sync's rule). TryAcquire fails while anyone waits.
//   - Hand-over: permits that come back (a release, a waiter that gives
//     up, a lapsed holder found by any call) are granted at once to the
//     waiters at the head of the queue whose requests fit, and each is
//     pushed its grant, so it starts without another round trip. A grant
//     to a waiter that died blocks its permits for at most half its
//     heartbeat (its claim lease); a dead waiter at the head holds the
//     queue for at most its heartbeat (relock.WithHeartbeat, default 5 s).
//     Every wait is also bounded by a timer, so a lost push delays a
//     waiter and never hangs it.
//   - Unknown outcomes: scripts are idempotent per request, so a command
//     that go-redis resends after a lost reply is applied once; an
//     Acquire that succeeded at Redis after its ctx ended is undone; a
//     Release whose reply was lost is resent, with the same request id, by
//     the handle's next call.
//   - Cost: one script call per Acquire, TryAcquire or Release when it
//     need not wait, doing O(log n) work in the number n of holders and
//     waiters, plus O(log n) per lapsed holder dropped or waiter served
//     (each once): nothing scans the holders or the queue.
//
// # Capacity
//
// The capacity is the permits given to New, and every handle of one name
// must agree on it. The semaphore stores it while any handle holds
// permits; a call from a handle made with other permits is then refused
// with an error matching relock.ErrCapacityMismatch, and changes nothing.
// While nobody holds permits nothing is stored, and the next acquire sets
// the capacity (so a name may be reused with another capacity once it is
// idle). Permits must lie in [1, MaxPermits].
//
// # Data
//
// All keys share the hash tag {name}: a hash relock:semaphore:{name} of
// each owner's permits (with the capacity and the total held), a sorted
// set relock:semaphore:{name}:owners of each owner's expiry (server
// time), the waiters' queue relock:semaphore:{name}:queue and their
// liveness deadlines :timeouts, each handle's request record :r:<token>
// (seconds) and a ForceRelease's :f:<request id> (15 s). Every key has a
// TTL; once holders and waiters are gone (released, given up or crashed),
// nothing is left, within one lease (a ForceRelease's record, within
// 15 s).
//
// # Limits
//
// A handle is one owner: all goroutines using it share its permits, and
// its permits are lost together. As with x/sync's semaphore, a handle
// that holds permits and waits for more than are left can wait forever
// (until ctx ends). relock.WithFencing is ignored. See the relock package
// documentation for what the guarantees rest on.
package semaphore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// MaxPermits is the largest capacity a semaphore may have.
const MaxPermits = math.MaxInt32

// Semaphore is a handle on a named distributed semaphore. The handle is
// the owner of the permits it acquires: it carries a random 128-bit owner
// token, and only this handle can release them. Two handles never share
// permits, even for the same name in one process.
//
// A Semaphore is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type Semaphore struct {
	h   *core.Holder
	p   *protocol
	err error // invalid permits, reported by every call
}

// New returns a handle on the semaphore called name, with the given
// capacity (see "Capacity" above). It never fails: an invalid name,
// capacity or option, or a nil client, is reported by every call, as an
// error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient. relock.WithLease gives the handle's permits a fixed
// lease instead of the watchdog's renewals; relock.WithHeartbeat sets how
// long a waiter keeps its place in the queue without showing it is alive.
func New(c *relock.Client, name string, permits int, opts ...relock.LockOption) *Semaphore {
	o := core.NewOwner(c, "semaphore", name, core.Options(opts))
	s := &Semaphore{}
	if permits < 1 || permits > MaxPermits {
		s.err = fmt.Errorf("%w: permits %d outside [1, %d]", lockerr.InvalidOption, permits, MaxPermits)
	}
	s.h = core.NewHolder(o, nil, watchdog.KindSemaphore)
	s.p = newProtocol(&s.h.Owner, permits)
	s.h.Speak(s.p, s.p.owners)
	return s
}

// check returns why op cannot run (with n permits, if n != 0); a closed
// Client is allowed only for a release.
func (s *Semaphore) check(op string, n int, release bool) error {
	if err := s.h.Check(); err != nil && !(release && errors.Is(err, lockerr.Closed)) {
		return s.errorf(op, err)
	}
	if s.err != nil {
		return s.errorf(op, s.err)
	}
	if n < 1 || (!release && n > s.p.permits) {
		return s.errorf(op, fmt.Errorf("%w: n = %d outside [1, %d]", lockerr.InvalidOption, n, s.p.permits))
	}
	return nil
}

// Acquire takes n permits, waiting until they are granted in arrival
// order or ctx ends. n must lie in [1, capacity]; otherwise it returns an
// error matching relock.ErrInvalidOption at once. Each acquire resets the
// lease of all of the handle's permits to its full length.
//
// On ctx end it returns an error matching both relock.ErrNotObtained and
// ctx.Err(), the handle has left the queue, and it holds what it held before
// (permits granted to it meanwhile are passed on). A Redis error
// (unreachable, a timeout) ends the wait too: it returns that error after
// the same clean-up (what a Redis that does not answer keeps of the attempt
// expires on its own, within the lease); call it again to wait again. After
// the handle's permits were lost (see Lost), Acquire returns an error
// matching relock.ErrNotHeld until they have all been released (see "When a
// hold is lost" in package relock).
func (s *Semaphore) Acquire(ctx context.Context, n int) error { return s.acquire(ctx, n, 0, false) }

// AcquireFor is Acquire for permits with a lease of their own: when the
// handle holds none yet, its permits get a fixed lease, which the watchdog
// does not renew (as relock.WithLease, for this hold only); otherwise the
// lease of the handle's permits becomes at least lease from now: unlike
// Extend, and unlike a re-entry's LockFor on the other lock types, it
// never shortens a longer lease they have. All of a handle's permits
// share one lease. lease must lie in [10ms, 7 days].
func (s *Semaphore) AcquireFor(ctx context.Context, n int, lease time.Duration) error {
	return s.acquire(ctx, n, lease, true)
}

func (s *Semaphore) acquire(ctx context.Context, n int, lease time.Duration, fixed bool) error {
	if err := s.check("acquire", n, false); err != nil {
		return err
	}
	if err := s.h.CheckAcquire(lease, fixed); err != nil {
		return s.errorf("acquire", err)
	}
	return s.h.Wait(ctx, "acquire", core.Units, n, lease, core.WaitSpec{
		Channel: s.h.Keys.Channel,
		// Each attempt is the waiter's heartbeat.
		MaxWait: min(s.h.Heartbeat()/4, core.MaxWait),
	})
}

// TryAcquire makes one attempt to take n permits: (true, nil) if it took
// them, (false, nil) if they are not free or others wait (it never
// overtakes a waiter, and never joins the queue). n must lie in [1,
// capacity].
func (s *Semaphore) TryAcquire(ctx context.Context, n int) (bool, error) {
	return s.tryAcquire(ctx, n, 0, false)
}

// TryAcquireFor is TryAcquire with AcquireFor's lease.
func (s *Semaphore) TryAcquireFor(ctx context.Context, n int, lease time.Duration) (bool, error) {
	return s.tryAcquire(ctx, n, lease, true)
}

func (s *Semaphore) tryAcquire(ctx context.Context, n int, lease time.Duration, fixed bool) (bool, error) {
	if err := s.check("tryacquire", n, false); err != nil {
		return false, err
	}
	if err := s.h.CheckAcquire(lease, fixed); err != nil {
		return false, s.errorf("tryacquire", err)
	}
	return s.h.Try(ctx, "tryacquire", core.Units, n, lease)
}

// Release gives back n of the permits this handle holds; they go to the
// waiters at the head of the queue whose requests fit. The last one ends
// the handle's lease (the watchdog stops renewing). Releasing more than
// the handle holds (never acquired, already released, or lost) returns an
// error matching relock.ErrNotHeld and changes nothing; n < 1 returns one
// matching relock.ErrInvalidOption. If the reply is lost (a network
// error), calling Release again with the same n is safe: it repeats the
// same request, which Redis answers as it did the first time.
//
// It is not cancelled by ctx: the release is sent, and its reply awaited
// for up to 5 s, even when ctx has ended (ctx's values are kept), and
// renewals of the hold stop when the final Release is called, so one whose
// outcome cannot be known (Redis unreachable) ends with its lease at the
// latest.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := s.check("release", n, true); err != nil {
		return err
	}
	return s.h.Release(ctx, "release", core.Units, n)
}

// Held returns the permits this handle holds now, as far as it knows: 0
// once they are lost (see Lost): past their local deadline they are, and
// Held declares it if the watchdog, late, has not yet. It asks nothing of
// Redis.
func (s *Semaphore) Held() int { return s.h.Held(core.Units) }

// Available returns the permits free now (the capacity minus those held),
// after taking back the permits of holders whose lease has run out and
// granting what fits to the waiters at the head of the queue. It is one
// script call. While others wait, free permits may still not be enough
// for the head of the queue.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := s.check("available", 1, false); err != nil {
		return 0, err
	}
	n, err := s.h.RunShared(ctx, scripts.SemAvailable, s.p.queries, s.p.permits, s.h.Keys.Channel).Int()
	if err != nil {
		return 0, s.errorf("available", s.p.mismatch(err))
	}
	return n, nil
}

// ForceRelease takes back every permit of every holder and grants them to
// the waiters at the head of the queue; it reports whether any permit was
// held. It is meant for operators (permits stuck after a bug). The former
// holders learn it at their watchdog's next renewal (within a third of
// the watchdog timeout; with a fixed lease, at their local deadline):
// their Lost channels fire and their releases return an error matching
// relock.ErrNotHeld. A former holder that was waiting in Acquire for more
// permits is not granted them: that Acquire returns an error matching
// relock.ErrNotHeld at its next attempt (within about a second), by when
// its Lost channel has fired. A handle made with another capacity than the one in
// use gets an error matching relock.ErrCapacityMismatch, and nothing is
// changed. It is applied once even when resent after a lost reply (it
// never takes back permits granted since, such as those it granted), and
// what a network error leaves unknown, is as for mutex.Mutex.ForceUnlock.
func (s *Semaphore) ForceRelease(ctx context.Context) (bool, error) {
	if err := s.check("force-release", 1, false); err != nil {
		return false, err
	}
	out, err := force.Unlock(ctx, &s.h.Owner, s.p.permits, nil)
	if err != nil {
		return false, s.errorf("force-release", s.p.mismatch(err))
	}
	return out == force.Deleted, nil
}

// Lost returns a channel that is closed when the handle's current permits
// are lost: their lease ran out, they were taken back (ForceRelease, the
// keys deleted), no renewal was confirmed before the local deadline, or
// the Client was closed. All of a handle's permits are lost together.
// Permits that end by Release are not lost, and their channel stays open.
// Before the first successful acquire it returns nil: a receive from it
// blocks forever (nothing held can be lost).
func (s *Semaphore) Lost() <-chan struct{} { return s.h.Lost() }

// LostErr returns why the handle's most recent permits were lost (an
// error matching relock.ErrNotHeld and one of relock.ErrLeaseExpired,
// relock.ErrLockGone or relock.ErrClosed), or nil if they were not lost.
func (s *Semaphore) LostErr() error { return s.h.LostErr() }

// Extend sets the remaining lease of the handle's permits (all of them:
// they share one lease) to d (see mutex.Mutex.Extend).
func (s *Semaphore) Extend(ctx context.Context, d time.Duration) error {
	if err := s.check("extend", 1, false); err != nil {
		return err
	}
	return s.h.Extend(ctx, "extend", d)
}

// HoldContext returns a context derived from ctx that is cancelled when
// the handle's current permits end: lost (all together), or released by
// the Release of the last of them (see mutex.Mutex.HoldContext).
func (s *Semaphore) HoldContext(ctx context.Context) context.Context { return s.h.HoldContext(ctx) }

// Resume adopts the permits that the handle's owner token holds in Redis
// (see mutex.Mutex.Resume): Held then says how many.
func (s *Semaphore) Resume(ctx context.Context) error {
	if err := s.check("resume", 1, false); err != nil {
		return err
	}
	return s.h.Resume(ctx, "resume")
}

// Run runs s atomically with a check that this handle still holds at
// least one permit (see mutex.Mutex.Run and relock.Script).
func (s *Semaphore) Run(ctx context.Context, script *relock.Script, keys []string, args ...any) *redis.Cmd {
	if err := s.check("run", 1, false); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	return s.h.RunGuarded(ctx, "run", core.GuardedOf(script), keys, args...)
}

// Holders returns who holds the semaphore's permits now, as anybody can see it
// (see mutex.Mutex.Holders).
func (s *Semaphore) Holders(ctx context.Context) ([]relock.Holder, error) {
	if err := s.h.Check(); err != nil {
		return nil, s.h.Errorf("holders", err)
	}
	hs, err := inspect.Holders(ctx, s.h.E.RDB, s.h.Kind, s.h.Name)
	if err != nil {
		return nil, s.h.Errorf("holders", err)
	}
	return hs, nil
}

// Token returns the handle's owner token (see mutex.Mutex.Token).
func (s *Semaphore) Token() string { return s.h.Token }

// Fingerprint returns the handle's owner fingerprint (see
// mutex.Mutex.Fingerprint).
func (s *Semaphore) Fingerprint() string { return core.Fingerprint(s.h.Token) }

// Locker returns a relock.Locker that acquires and releases n permits of
// this handle: its Lock is Acquire(ctx, n), TryLock TryAcquire(ctx, n),
// Unlock Release(ctx, n), LockFor AcquireFor(ctx, n, lease) and TryLockFor
// TryAcquireFor(ctx, n, lease), for relock.Do and relock.MultiLock; its
// other methods are the handle's own. n must lie in [1, capacity]: otherwise
// every call returns an error matching relock.ErrInvalidOption.
func (s *Semaphore) Locker(n int) relock.Locker { return permits{s, n} }

// permits are n permits of a Semaphore as a relock.Locker.
type permits struct {
	s *Semaphore
	n int
}

func (p permits) Lock(ctx context.Context) error            { return p.s.Acquire(ctx, p.n) }
func (p permits) TryLock(ctx context.Context) (bool, error) { return p.s.TryAcquire(ctx, p.n) }
func (p permits) Unlock(ctx context.Context) error          { return p.s.Release(ctx, p.n) }
func (p permits) Lost() <-chan struct{}                     { return p.s.Lost() }
func (p permits) LostErr() error                            { return p.s.LostErr() }
func (p permits) Kind() string                              { return "semaphore" }
func (p permits) Name() string                              { return p.s.Name() }
func (p permits) Extend(ctx context.Context, d time.Duration) error {
	return p.s.Extend(ctx, d)
}
func (p permits) HoldContext(ctx context.Context) context.Context { return p.s.HoldContext(ctx) }
func (p permits) LockFor(ctx context.Context, lease time.Duration) error {
	return p.s.AcquireFor(ctx, p.n, lease)
}
func (p permits) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return p.s.TryAcquireFor(ctx, p.n, lease)
}
func (p permits) Token() string       { return p.s.Token() }
func (p permits) Fingerprint() string { return p.s.Fingerprint() }

// Permits returns the capacity the handle was made with.
func (s *Semaphore) Permits() int { return s.p.permits }

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.h.Name }

func (s *Semaphore) errorf(op string, err error) error {
	return fmt.Errorf("semaphore: %s %q: %w", op, s.h.Name, err)
}

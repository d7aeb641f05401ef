package relock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/relock-go/relock/internal/core"
)

// EventType says what happened to a hold.
type EventType int

// Event types.
const (
	// EventAcquired: a new hold began (not a re-entry). Wait is how long
	// the acquire call took.
	EventAcquired EventType = iota + 1
	// EventReleased: the final unlock of a hold succeeded. Held is how long
	// the hold lasted.
	EventReleased
	// EventFailed: an acquire call returned an error: a blocking Lock gave
	// up (ctx ended, Client closed, Redis error), or an acquire was refused
	// (ErrAlreadyHeld, ErrUpgrade, ErrNotHeld while a lost hold's unlocks
	// are owed). Wait is how long the call took; Err is what it returned.
	// A TryLock that finds the lock held is not a failure, and calls
	// refused for invalid input (ErrInvalidName, ErrNilClient...) or on a
	// closed Client report no event.
	EventFailed
	// EventLost: a hold was lost: its lease ran out, its key was deleted or
	// taken, no renewal was confirmed before the local deadline, or the
	// Client was closed. Held is how long it lasted; Err matches
	// ErrNotHeld and, for why, one of ErrLeaseExpired, ErrLockGone and
	// ErrClosed (a shutdown that did not unlock first).
	EventLost
	// EventRenewalFailed: a watchdog renewal round could not confirm the
	// renewal of Holds holds (a transient error, in Err); it retries
	// soon, and a hold whose renewal stays unconfirmed until its local
	// deadline is lost (EventLost). A round fails when its call does:
	// soon for a refused connection (go-redis releases newer than 9.7
	// retry the dial until the round's deadline), but only after
	// go-redis's ReadTimeout (and its retries) on a server that stalls,
	// which may be after the holds' deadlines, so EventLost can come
	// first. Kind, Name and Owner are empty: one round renews the holds
	// of every lock.
	EventRenewalFailed
	// EventPushUnavailable: Redis refused the Client's subscription to
	// wake-ups (a user without channel rights, a proxy without pub/sub):
	// from then on waiters poll on their timers (at most a second apart,
	// or WithPolling's interval). Once per Client; Err says what Redis
	// answered. Kind, Name and Owner are empty.
	EventPushUnavailable
)

// String returns the event type's name: "acquired", "released", "failed",
// "lost", "renewal-failed" or "push-unavailable".
func (t EventType) String() string { return core.EventType(t).String() }

// Event is something that happened to a hold, as given to an observer
// (see WithObserver).
type Event struct {
	Type EventType // what happened
	Kind string    // lock type: "mutex", "reentrant", "fair", "rwlock", "semaphore", "redlock", "election"
	Name string    // the lock's name
	// Mode is "read" or "write" for an rwlock's acquire, failure and
	// release (the side of the call that began or ended the hold; a
	// handle's read and write holds are one hold); empty otherwise.
	Mode string
	// Owner is the owner's fingerprint: 8 hex digits of a hash of its
	// token, the same that logs and the relock command show. The token
	// itself is never given out.
	Owner string
	Wait  time.Duration // EventAcquired, EventFailed: from the acquire call to its outcome
	Held  time.Duration // EventReleased, EventLost: how long the hold lasted
	Err   error         // EventFailed, EventLost, EventRenewalFailed: why (matches the same sentinels the caller sees)
	Holds int           // EventRenewalFailed: how many holds the round could not renew
	// Attempts is, for EventAcquired and EventFailed, how many attempts
	// the acquire call sent to Redis (a first attempt that found the lock
	// free: 1; 0 for a hold taken by Resume); Granted, for EventAcquired,
	// whether a release handed the lock over to the waiting call (pushed)
	// rather than one of its attempts taking it.
	Attempts int
	Granted  bool
	// Ctx is, for EventAcquired and EventFailed, the context the caller
	// gave the acquire call, so that an observer can tie the event to the
	// caller's trace (its values; it may have ended); nil otherwise.
	Ctx context.Context
}

// WithObserver adds f to the observers of the Client's events. It may be
// given several times: every observer gets every event, in the order
// given.
//
// Observers are called synchronously from the goroutine that did the work
// (the caller of Lock or Unlock, or the Client's watchdog), after the
// lock's state was settled and without any lock of relock held: they may
// call the handle's methods, but they must be fast, since the lock call or
// the watchdog waits for them. An observer that panics is recovered from
// (and logged with WithLogger's logger); the lock's state is unaffected.
// With no observer (and no logger) the lock path builds no event at all.
func WithObserver(f func(Event)) Option {
	return func(c *clientConfig) {
		if f == nil {
			return
		}
		c.Observers = append(c.Observers, func(e core.Event) {
			f(Event{Type: EventType(e.Type), Kind: e.Kind, Name: e.Name, Mode: e.Mode, Owner: e.Owner,
				Wait: e.Wait, Held: e.Held, Err: e.Err, Holds: e.Holds,
				Attempts: e.Attempts, Granted: e.Granted, Ctx: e.Ctx})
		})
	}
}

// WithPolling makes the Client's waiters poll instead of subscribing to
// pushed wake-ups: a waiting Lock tries again every d (or sooner, when the
// holder's lease ends), like Redisson's spin lock. Use it when the Redis
// user has no channel rights or a proxy between relock and Redis does not
// carry pub/sub; grants made on release are then found by the next poll.
// Without it relock notices a refused subscription by itself (once:
// EventPushUnavailable) and falls back to polling about once a second. d
// must lie in [1ms, 1s]: a waiter never waits longer than a second
// between attempts anyway (a queued waiter keeps its place alive, a
// pushed grant must be taken within its short claim lease), so a longer
// interval would change nothing.
func WithPolling(d time.Duration) Option {
	return func(c *clientConfig) {
		c.Poll = d
		if (d < time.Millisecond || d > core.MaxWait) && c.err == nil {
			c.err = fmt.Errorf("%w: polling interval %v outside [1ms, %v]", ErrInvalidOption, d, core.MaxWait)
		}
	}
}

// WithLogger makes the Client log, at Warn level, every lost hold, every
// renewal round that failed, and every acquire that failed for a reason
// other than its ctx ending, with the lock's kind and name and the
// owner's fingerprint (never the token); and, at Error, an observer that
// panicked. Without it relock logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.Logger = l }
}

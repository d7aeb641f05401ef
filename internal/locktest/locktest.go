// Package locktest holds behaviours that every relock lock type must show,
// written once and run by each lock package's tests against its own type,
// on miniredis and on a real redis-server (see redistest.Run).
package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Handle is one side of a lock handle: Lock/TryLock/Unlock/Lost of an
// exclusive lock, or the read or the write side of a read/write lock.
type Handle interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context) (bool, error)
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
	Held() bool
	LostErr() error
	Fence() int64
	// The hold as a Go value.
	LockFor(ctx context.Context, lease time.Duration) error
	Extend(ctx context.Context, d time.Duration) error
	HoldContext(ctx context.Context) context.Context
	Token() string
	Fingerprint() string
	Resume(ctx context.Context) error
	Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd
	Holders(ctx context.Context) ([]relock.Holder, error)
}

// lockerOf returns h as a relock.Locker (for relock.Do): a Side's Locker,
// or h itself.
func lockerOf(h Handle) relock.Locker {
	if s, ok := h.(Side); ok {
		return s.Locker
	}
	return h.(relock.Locker)
}

// Queries are the operator's calls every lock type offers.
type Queries interface {
	IsLocked(ctx context.Context) (bool, error)
	RemainingLease(ctx context.Context) (time.Duration, error)
	ForceUnlock(ctx context.Context) (bool, error)
}

// Kind describes a lock type (or one side of one) to the shared tests.
type Kind struct {
	// New returns a handle on the lock called name.
	New func(c *relock.Client, name string, opts ...relock.LockOption) Handle
	// Key is the lock's main key, whose deletion makes every hold lost.
	Key func(name string) string
	// Reentrant says whether the holding handle may lock again.
	Reentrant bool
	// KeepsLonger says that a handle's new acquire asking for a shorter
	// lease than its hold has leaves the longer one at Redis (a
	// semaphore's permits), where the other types set the one asked for.
	KeepsLonger bool
	// Type is the lock type's name in events ("mutex"...); Mode is the
	// events' Mode for this side ("read"/"write" for an rwlock).
	Type, Mode string
	// Grants says whether a release hands the lock to a waiter of this
	// kind directly (not an rwlock's readers); Starves, that it does so
	// only once the waiter has waited past core.StarvationThreshold.
	Grants, Starves bool
	// Waiter, if set, returns the handle that waits behind a holder in
	// the tests (an rwlock's writer behind its readers); else New.
	Waiter func(c *relock.Client, name string, opts ...relock.LockOption) Handle
	// Tokens returns the owner tokens stored for the lock at Redis (to
	// check that none is ever shown).
	Tokens func(ctx context.Context, rdb redis.UniversalClient, name string) []string
	// Keeps lists the suffixes of the keys that this kind keeps after its
	// holders and waiters are gone, for longer than the suites wait (an
	// election's term counter ":fence", and its log ":log", which lives a
	// lease).
	Keeps []string
}

func (k Kind) waiter(c *relock.Client, name string, opts ...relock.LockOption) Handle {
	if k.Waiter != nil {
		return k.Waiter(c, name, opts...)
	}
	return k.New(c, name, opts...)
}

// Side adapts methods (such as an rwlock's RLock/TryRLock/RUnlock) to a
// Handle, and embeds the lock's Queries.
type Side struct {
	Queries
	LockFunc    func(ctx context.Context) error
	TryLockFunc func(ctx context.Context) (bool, error)
	UnlockFunc  func(ctx context.Context) error
	LostFunc    func() <-chan struct{}
	HeldFunc    func() bool
	LostErrFunc func() error
	LockForFunc func(ctx context.Context, lease time.Duration) error
	// Holds is the handle's hold API (Extend, HoldContext, Token,
	// Fingerprint), and Locker the side as a relock.Locker (an rwlock's
	// RLocker, a semaphore's Locker(1)).
	Holds  Holds
	Locker relock.Locker
}

// Holds is the part of a handle's API that concerns its hold as a whole.
type Holds interface {
	Extend(ctx context.Context, d time.Duration) error
	HoldContext(ctx context.Context) context.Context
	Token() string
	Fingerprint() string
	Resume(ctx context.Context) error
	Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd
	Holders(ctx context.Context) ([]relock.Holder, error)
}

// LockFor implements Handle.
func (s Side) LockFor(ctx context.Context, lease time.Duration) error {
	return s.LockForFunc(ctx, lease)
}

// Extend implements Handle.
func (s Side) Extend(ctx context.Context, d time.Duration) error { return s.Holds.Extend(ctx, d) }

// HoldContext implements Handle.
func (s Side) HoldContext(ctx context.Context) context.Context { return s.Holds.HoldContext(ctx) }

// Token implements Handle.
func (s Side) Token() string { return s.Holds.Token() }

// Fingerprint implements Handle.
func (s Side) Fingerprint() string { return s.Holds.Fingerprint() }

// Resume implements Handle.
func (s Side) Resume(ctx context.Context) error { return s.Holds.Resume(ctx) }

// Holders implements Handle.
func (s Side) Holders(ctx context.Context) ([]relock.Holder, error) { return s.Holds.Holders(ctx) }

// Run implements Handle.
func (s Side) Run(ctx context.Context, script *relock.Script, keys []string, args ...any) *redis.Cmd {
	return s.Holds.Run(ctx, script, keys, args...)
}

// Fence implements Handle: a read hold has no fencing token.
func (s Side) Fence() int64 { return 0 }

// Lock implements Handle.
func (s Side) Lock(ctx context.Context) error { return s.LockFunc(ctx) }

// TryLock implements Handle.
func (s Side) TryLock(ctx context.Context) (bool, error) { return s.TryLockFunc(ctx) }

// Unlock implements Handle.
func (s Side) Unlock(ctx context.Context) error { return s.UnlockFunc(ctx) }

// Lost implements Handle.
func (s Side) Lost() <-chan struct{} { return s.LostFunc() }

// Held implements Handle.
func (s Side) Held() bool { return s.HeldFunc() }

// LostErr implements Handle.
func (s Side) LostErr() error { return s.LostErrFunc() }

// testCtx returns a context for one test: it ends after 30 s, so that a
// wait that never ends fails the test where it waits instead of hanging
// the binary until go test's timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

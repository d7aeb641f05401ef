// Package locktest holds behaviours that every relock lock type must show,
// written once and run by each lock package's tests against its own type,
// on miniredis and on a real redis-server (see redistest.Run).
package locktest

import (
	"context"

	"github.com/relock-go/relock"
)

// Handle is one side of a lock handle: Lock/TryLock/Unlock/Lost of an
// exclusive lock, or the read or the write side of a read/write lock.
type Handle interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context) (bool, error)
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
}

// Kind describes a lock type (or one side of one) to the shared tests.
type Kind struct {
	// New returns a handle on the lock called name.
	New func(c *relock.Client, name string, opts ...relock.LockOption) Handle
	// Key is the lock's main key, whose deletion makes every hold lost.
	Key func(name string) string
	// Reentrant says whether the holding handle may lock again.
	Reentrant bool
}

// Side adapts methods (such as an rwlock's RLock/TryRLock/RUnlock) to a
// Handle.
type Side struct {
	LockFunc    func(ctx context.Context) error
	TryLockFunc func(ctx context.Context) (bool, error)
	UnlockFunc  func(ctx context.Context) error
	LostFunc    func() <-chan struct{}
}

// Lock implements Handle.
func (s Side) Lock(ctx context.Context) error { return s.LockFunc(ctx) }

// TryLock implements Handle.
func (s Side) TryLock(ctx context.Context) (bool, error) { return s.TryLockFunc(ctx) }

// Unlock implements Handle.
func (s Side) Unlock(ctx context.Context) error { return s.UnlockFunc(ctx) }

// Lost implements Handle.
func (s Side) Lost() <-chan struct{} { return s.LostFunc() }

package relock

import "github.com/relock-go/relock/internal/lockerr"

// Errors returned by relock and its lock packages. Match them with
// errors.Is: returned errors wrap them with the operation and lock name.
var (
	// ErrNotHeld is returned by an unlock from a handle that does not hold
	// the lock: it never locked it, already unlocked it, or lost it. Why a
	// hold was lost also matches exactly one of ErrLeaseExpired,
	// ErrLockGone and ErrClosed. Nothing of the current owner is touched.
	ErrNotHeld = lockerr.NotHeld

	// ErrNotObtained is returned by a blocking acquire that gave up. When
	// it gave up because ctx ended, the error also matches ctx.Err(); when
	// the Client was closed, it also matches ErrClosed.
	ErrNotObtained = lockerr.NotObtained

	// ErrAlreadyHeld is returned by Lock or TryLock on a mutex (which is
	// not reentrant) by a handle that already holds it: the call fails at
	// once instead of deadlocking.
	ErrAlreadyHeld = lockerr.AlreadyHeld

	// ErrUpgrade is returned when a handle holding only read holds of a
	// read/write lock asks for the write lock (which would deadlock).
	ErrUpgrade = lockerr.Upgrade

	// ErrInvalidName is returned for an empty lock name, one longer than
	// 1024 bytes, or one starting with '}'.
	ErrInvalidName = lockerr.InvalidName

	// ErrInvalidOption is returned for an invalid Option or LockOption,
	// such as a lease outside [10ms, 7 days].
	ErrInvalidOption = lockerr.InvalidOption

	// ErrNilClient is returned by every operation of a lock made from a
	// nil *Client, or from a Client made with a nil Redis client.
	ErrNilClient = lockerr.NilClient

	// ErrClosed is returned by operations of locks whose Client is closed.
	ErrClosed = lockerr.Closed

	// ErrLeaseExpired is why a hold was lost when its lease ran out: a
	// fixed lease (WithLease) reached its end, or no renewal was confirmed
	// before the local deadline (Redis unreachable or slow, or this
	// process paused). It comes with ErrNotHeld, from LostErr, Unlock and
	// EventLost.
	ErrLeaseExpired = lockerr.Expired

	// ErrLockGone is why a hold was lost when Redis no longer had it as
	// this owner's: the key was deleted (ForceUnlock, an operator, a
	// FLUSH, a restart or failover that lost it) or had expired and been
	// taken by another owner. It comes with ErrNotHeld.
	ErrLockGone = lockerr.Gone

	// ErrNotReplicated is returned by an acquire made WithSyncReplicas when
	// fewer replicas than asked confirmed the lock in time: the lock was
	// given back, nothing is held. An Extend returns it when they did not
	// confirm the extension: the hold stays, extended at the master only
	// (see WithSyncReplicas).
	ErrNotReplicated = lockerr.NotReplicated

	// ErrCapacityMismatch is returned by a semaphore call from a handle
	// made with a number of permits other than the capacity the semaphore
	// is in use with (the permits of the handles holding permits now);
	// nothing is changed. Every handle of one semaphore name must be made
	// with the same permits.
	ErrCapacityMismatch = lockerr.CapacityMismatch
)

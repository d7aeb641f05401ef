// Package lockerr defines relock's sentinel errors once, so that the root
// package (which re-exports them) and the internal packages (which return
// them) share the same values and errors.Is works across both.
package lockerr

import (
	"context"
	"errors"
)

// Sentinel errors; the root package documents each one.
var (
	NotHeld       = errors.New("relock: lock not held")
	NotObtained   = errors.New("relock: lock not obtained")
	AlreadyHeld   = errors.New("relock: lock already held by this handle")
	Upgrade       = errors.New("relock: cannot upgrade a read hold to a write hold")
	InvalidName   = errors.New("relock: invalid lock name")
	InvalidOption = errors.New("relock: invalid option")
	NilClient     = errors.New("relock: nil client")
	Closed        = errors.New("relock: client closed")
	Expired       = errors.New("relock: lease expired")
	Gone          = errors.New("relock: lock gone or taken by another owner")
	NotReplicated = errors.New("relock: lock not confirmed by enough replicas")
	// CapacityMismatch: a semaphore handle's permits differ from those of
	// the handles using the semaphore.
	CapacityMismatch = errors.New("relock: semaphore capacity mismatch")
)

// loss is why a hold was lost: it matches NotHeld and its reason
// (Expired, Gone or Closed).
type loss struct {
	reason error
	detail string
}

func (e loss) Error() string        { return NotHeld.Error() + ": " + e.detail }
func (e loss) Unwrap() error        { return e.reason }
func (e loss) Is(target error) bool { return target == NotHeld }

// Loss returns why a hold was lost: an error matching NotHeld and reason,
// whose message is "relock: lock not held: " + detail.
func Loss(reason error, detail string) error { return loss{reason: reason, detail: detail} }

// ClosedLoss is why a hold is lost when its client is closed.
var ClosedLoss = Loss(Closed, "client closed")

// notObtained is a blocking acquire that gave up because of cause (a ctx
// error or a closed client): it matches NotObtained and its cause.
type notObtained struct{ cause error }

func (e notObtained) Error() string        { return NotObtained.Error() + ": " + e.cause.Error() }
func (e notObtained) Unwrap() error        { return e.cause }
func (e notObtained) Is(target error) bool { return target == NotObtained }

// BareGiveUp reports whether err is a GaveUp error as it was made, not yet
// wrapped with the lock's name.
func BareGiveUp(err error) bool { _, ok := err.(notObtained); return ok }

// GaveUp returns an error matching both NotObtained and cause.
func GaveUp(cause error) error { return notObtained{cause: cause} }

// CtxGaveUp returns GaveUp(ctx.Err()) if ctx is done, else nil.
func CtxGaveUp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return GaveUp(err)
	}
	return nil
}

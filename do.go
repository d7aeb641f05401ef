package relock

import (
	"context"
	"fmt"
	"reflect"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
)

// Do locks l, waiting as its Lock does, runs fn with a context derived
// from ctx that is cancelled when the hold is lost, and unlocks l when fn
// returns, or panics (the panic then goes on, after the release). It
// returns Lock's error if l could not be locked (fn does not run), else
// fn's error joined with Unlock's (errors.Is and errors.As see both;
// only one of them when it wraps the other, as Unlock's wraps a loss that
// fn returned from context.Cause).
//
// fn's context ends when ctx does, and when the hold is lost (the lease
// ran out, the lock was deleted or taken, the Client was closed): its
// context.Cause is then the loss, an error matching ErrNotHeld and
// ErrLeaseExpired, ErrLockGone or ErrClosed, as Lost and LostErr report
// it. fn should stop its work when its context is done. If the hold was
// lost while fn ran, Do's error matches ErrNotHeld and the loss's reason
// (from Unlock), whatever fn returned.
//
// The release is not cancelled by ctx (see the lock types' Unlock): a Do
// whose ctx ended while fn ran still releases the lock: relock's Unlock
// detaches its release from ctx's cancellation itself, and a Locker of
// another package (or a Multi) gets a context detached from ctx's
// cancellation, with ctx's values, that ends 5 s after fn returned, or
// when its Unlock returns. Do adds no Redis command to those of Lock and
// Unlock, and keeps no goroutine while fn runs for relock's lock types
// (it does for a Locker of another package, which it watches through
// Lost). For a read hold of an rwlock, pass its RLocker; for n permits
// of a semaphore, its Locker(n).
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) (err error) {
	if isNilLocker(l) || fn == nil {
		return fmt.Errorf("do: %w: nil lock or function", lockerr.InvalidOption)
	}
	if err := l.Lock(ctx); err != nil {
		return err
	}
	hctx, stop := holdContext(ctx, l)
	returned := false
	defer func() {
		stop()
		uerr := unlock(ctx, l)
		if returned {
			err = lockerr.JoinEnd(err, uerr, "unlock")
		}
		// Otherwise fn panicked: the panic goes on, the lock released.
	}()
	err = fn(hctx)
	returned = true
	return err
}

// unlock releases l's hold whatever ctx's state: relock's lock types
// detach their releases from ctx themselves; a Locker of another package
// (or a Multi, which may hold some) might honour an ended ctx, so it gets
// ctx detached, bounded by core.ReleaseTimeout, and cancelled once its
// Unlock returns (whatever that Unlock left tied to the context ends with
// it, as it would with a ctx of its caller's).
func unlock(ctx context.Context, l Locker) error {
	if _, multi := l.(*Multi); !multi {
		if _, own := l.(holdContexter); own {
			return l.Unlock(ctx)
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), core.ReleaseTimeout)
	defer cancel()
	return l.Unlock(uctx)
}

// holdContexter is what relock's lock handles (and the Lockers their
// RLocker and Locker return) offer beyond Locker.
type holdContexter interface {
	HoldContext(ctx context.Context) context.Context
}

// holdContext returns the context of l's current hold, derived from ctx,
// and a function that ends what watching the hold needed.
func holdContext(ctx context.Context, l Locker) (context.Context, func()) {
	if hc, ok := l.(holdContexter); ok {
		return hc.HoldContext(ctx), func() {}
	}
	// A Locker of another package: watch its Lost channel.
	hctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	lost := l.Lost()
	go func() {
		select {
		case <-lost:
			cancel(lossOf(l))
		case <-stop:
		case <-hctx.Done():
		}
	}()
	return hctx, func() { close(stop); cancel(context.Canceled) }
}

// lossOf returns why l's hold was lost: its LostErr if it has one, else
// ErrNotHeld.
func lossOf(l Locker) error {
	if le, ok := l.(interface{ LostErr() error }); ok {
		if err := le.LostErr(); err != nil {
			return err
		}
	}
	return lockerr.NotHeld
}

// isNilLocker reports whether l is nil, or a typed nil pointer.
func isNilLocker(l Locker) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

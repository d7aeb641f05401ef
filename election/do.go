package election

import (
	"context"
	"fmt"

	"github.com/relock-go/relock/internal/lockerr"
)

// Do campaigns with value (waiting as Campaign does), runs fn while the
// handle leads, and resigns when fn returns, or panics (the panic then
// goes on, after the resignation), in the manner of client-go's
// leaderelection.RunOrDie. It returns Campaign's error if the handle was
// not elected (fn does not run), else fn's error joined with Resign's
// (errors.Is and errors.As see both; only one of them when it wraps the
// other, as Resign's wraps a loss that fn returned from context.Cause).
//
// fn's context ends when ctx does and when the leadership is lost (its
// lease ran out, it was ended by someone else, the Client was closed):
// its context.Cause is then the loss, an error matching relock.ErrNotHeld
// and relock.ErrLeaseExpired, relock.ErrLockGone or relock.ErrClosed, as
// LostErr reports it. fn must stop acting as the leader when its context
// is done; the leadership's term (Term) is its fencing token for whatever
// it acts on. If the leadership was lost while fn ran, Do's error matches
// ErrNotLeader and the loss's reason (from Resign), whatever fn returned.
//
// It is relock.Do for a leadership. The resignation is not cancelled by
// ctx (see Resign). Do adds no Redis
// command to those of Campaign and Resign, and starts no goroutine. To
// stand again after a loss, call Do again.
func (e *Election) Do(ctx context.Context, value string, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return e.errorf("do", fmt.Errorf("%w: nil function", lockerr.InvalidOption))
	}
	if err := e.Campaign(ctx, value); err != nil {
		return err
	}
	lctx := e.HoldContext(ctx)
	returned := false
	defer func() {
		rerr := e.Resign(ctx)
		if returned {
			err = lockerr.JoinEnd(err, rerr, "resign")
		}
		// Otherwise fn panicked: the panic goes on, the leadership resigned.
	}()
	err = fn(lctx)
	returned = true
	return err
}

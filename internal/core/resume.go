package core

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// Resume adopts the hold that the handle's owner token has in Redis (op
// names the call in errors): another handle of that token took it (a
// handle made with relock.WithToken in another process, or before a
// restart). The handle then holds what the token holds (its re-entry
// count, read and write holds or permits, and fencing token), as if it had
// taken it: Unlock releases it, and Lost and HoldContext report its loss.
// A hold the watchdog is to renew (the handle has no fixed lease) is
// renewed at once to the full watchdog timeout and from then on; a fixed
// lease runs on from where it is.
//
// It returns an error matching lockerr.NotHeld, and changes nothing, when
// the token holds nothing there (never taken, released, expired, or taken
// by another owner); one matching lockerr.AlreadyHeld when this handle
// holds something already. One script call; when Redis is unreachable it
// returns the error and the handle holds nothing (a hold that the call
// did renew is left to its lease).
func (h *Holder) Resume(ctx context.Context, op string) error {
	if err := h.Check(); err != nil {
		return h.errorf(op, err)
	}
	h.mu.Lock()
	defer h.unlock()
	h.syncLostLocked()
	if err := h.settleLocked(ctx); err != nil {
		return err
	}
	switch {
	case h.lost != nil:
		return h.errorf(op, fmt.Errorf("%w; unlock it before resuming", h.lost))
	case !h.held.Zero():
		return h.errorf(op, lockerr.AlreadyHeld)
	}
	lease, watched := h.Lease(), h.Watched()
	keys := []string{h.Keys.Lock}
	if h.watchAux != "" {
		keys = append(keys, h.watchAux)
	}
	renew := 0
	if watched {
		renew = 1
	}
	start := time.Now()
	h.sent++
	res, err := h.RunShared(ctx, scripts.Resume, keys, h.watchKind, h.Token, lease.Milliseconds(), renew).Int64Slice()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return h.errorf(op, err)
	}
	held := Counts{int(res[0]), int(res[1])}
	if held.Zero() || res[3] <= 0 {
		return h.errorf(op, fmt.Errorf("%w: this token holds nothing", lockerr.NotHeld))
	}
	class := Units
	if res[1] > 0 {
		class = Write
	}
	h.beginLocked(class, watched, start, nil, false)
	h.held, h.fence[class], h.lease, h.ending = held, res[2], lease, false
	h.needLocked(h.held)
	left := time.Duration(res[3]) * time.Millisecond
	if watched {
		left = lease // renewed to it
	}
	if h.E.WD.Add(h.hold, start, left, watched) {
		h.lostLocked(lockerr.ClosedLoss)
		return h.errorf(op, lockerr.ClosedLoss)
	}
	if !watched {
		// The watchdog never renews it; re-entries and partial releases
		// reset it to the handle's lease.
		h.E.WD.Extend(h.hold, start, left)
	}
	return nil
}

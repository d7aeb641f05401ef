package rwlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// The state machine behind a handle: one acquire or release is one script
// call, made under the handle's mutex (never held while waiting). The local
// counts r and w decide what a release means to Redis ("this handle keeps
// nothing" drops all of its fields), and one watchdog hold covers all of a
// handle's holds, read and write, from its first acquire to its last release.

func (l *RWMutex) counts(ctx context.Context) (r, w int, err error) {
	if err := l.o.Check(); err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	res, err := l.o.Run(ctx, scripts.RWCount, []string{l.o.Keys.Lock}, l.o.Token).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	return int(res[0]), int(res[1]), nil
}

// errUpgrade is what a handle holding only reads gets from a write acquire.
func (l *RWMutex) errUpgrade() error {
	return l.errorf("lock", fmt.Errorf("%w: this handle holds read holds only", lockerr.Upgrade))
}

func (l *RWMutex) attempt(k kind, block bool) core.Attempt {
	op := "rlock"
	if k == write {
		op = "lock"
	}
	return func(ctx context.Context) (bool, time.Duration, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.syncLostLocked()
		if err := l.settleLocked(ctx); err != nil {
			return false, 0, err
		}
		if k == write && l.r > 0 && l.w == 0 {
			return false, 0, l.errUpgrade()
		}
		if err := lockerr.CtxGaveUp(ctx); err != nil {
			return false, 0, err
		}
		req := l.o.NextRequest()
		keys := []string{l.o.Keys.Lock, l.o.Keys.Fence, l.o.Keys.Record(l.o.Token), l.wq}
		fencing, blocking := 0, 0
		if l.o.Cfg.Fencing {
			fencing = 1
		}
		if block {
			blocking = 1
		}
		args := []any{l.o.Token, l.o.Lease().Milliseconds(), req, l.r, l.w, fencing, l.o.RecordTTL(),
			string(k), blocking, WriterHeartbeat.Milliseconds()}
		start := time.Now()
		res, err := l.o.Run(ctx, scripts.RWAcquire, keys, args...).Int64Slice()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("unexpected reply %v", res)
		}
		if err != nil {
			if !core.IsRedisError(err) {
				l.abortLocked(ctx, req, k)
			}
			if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
				return false, 0, gerr
			}
			return false, 0, l.errorf(op, err)
		}
		if res[0] == 1 {
			gerr := lockerr.CtxGaveUp(ctx)
			if gerr == nil && errors.Is(l.o.E.Usable(), lockerr.Closed) {
				gerr = lockerr.GaveUp(lockerr.Closed)
			}
			if gerr != nil {
				// Granted after the caller's ctx ended or the client
				// closed: give it back.
				l.abortLocked(ctx, req, k)
				return false, 0, gerr
			}
			l.grantedLocked(k, start, res[1])
			return true, 0, nil
		}
		switch res[1] {
		case -3:
			return false, 0, l.errorf(op, fmt.Errorf("request %s was aborted", req))
		case -4:
			cause := fmt.Errorf("%w: re-entry refused: this handle's earlier holds are gone (lease lost)", lockerr.NotHeld)
			if l.hold != nil {
				l.o.E.WD.Lose(l.hold, cause)
			}
			l.r, l.w, l.hold, l.lostErr = 0, 0, nil, nil
			return false, 0, l.errorf(op, cause)
		case -5:
			return false, 0, l.errUpgrade()
		}
		return false, time.Duration(res[1]) * time.Millisecond, nil
	}
}

func (l *RWMutex) grantedLocked(k kind, start time.Time, fence int64) {
	if l.hold == nil {
		l.hold = watchdog.NewHold(l.o.Keys.Lock, watchdog.KindRW, l.o.Token)
		l.last, l.lostErr = l.hold, nil
	}
	if k == write {
		l.w++
		if l.w == 1 {
			l.fence = fence
		}
	} else {
		l.r++
	}
	// A grant (new or re-entered) set the handle's lease to its full length.
	l.o.E.WD.Add(l.hold, start, l.o.Lease(), l.o.Watched())
}

// abortLocked undoes acquire request req, whose outcome is unknown, so that
// a hold obtained after the caller gave up does not stay behind.
func (l *RWMutex) abortLocked(ctx context.Context, req string, k kind) {
	cctx, cancel := core.Cleanup(ctx)
	defer cancel()
	keys := []string{l.o.Keys.Lock, l.o.Keys.Record(l.o.Token), l.wq}
	// If this fails too, a hold it could not undo expires within a lease
	// (the handle's next acquire from zero holds also drops it).
	_ = l.o.Run(cctx, scripts.RWAbort, keys, l.o.Token, req, l.o.RecordTTL(), l.o.Keys.Channel,
		string(k), l.r, l.w).Err()
}

// syncLostLocked forgets holds that the watchdog has declared lost, so the
// next unlock reports the loss and the next acquire starts afresh.
func (l *RWMutex) syncLostLocked() {
	if l.hold == nil {
		return
	}
	if err := l.o.E.WD.Err(l.hold); err != nil {
		l.r, l.w, l.hold, l.lostErr, l.pending = 0, 0, nil, err, request{}
	}
}

// settleLocked resends a release whose outcome is unknown, with its request
// id, before the handle sends anything else: the record that makes the
// resend idempotent only remembers the handle's latest request.
func (l *RWMutex) settleLocked(ctx context.Context) error {
	if l.pending.id == "" {
		return nil
	}
	if err := l.releaseLocked(ctx, l.pending.k); err != nil && !errors.Is(err, lockerr.NotHeld) {
		return err
	}
	return nil
}

func (l *RWMutex) release(ctx context.Context, k kind) error {
	op := "runlock"
	if k == write {
		op = "unlock"
	}
	// A closed client still lets an unlock report the loss of its holds.
	if err := l.o.Check(); err != nil && !errors.Is(err, lockerr.Closed) {
		return l.errorf(op, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLostLocked()
	if l.pending.id != "" && l.pending.k != k {
		if err := l.settleLocked(ctx); err != nil {
			return err
		}
	}
	return l.releaseLocked(ctx, k)
}

func (l *RWMutex) releaseLocked(ctx context.Context, k kind) error {
	op := "runlock"
	if k == write {
		op = "unlock"
	}
	leftR, leftW := l.r, l.w
	if k == write {
		leftW--
	} else {
		leftR--
	}
	if leftR < 0 || leftW < 0 {
		if l.r == 0 && l.w == 0 && l.lostErr != nil {
			err := l.lostErr
			l.lostErr = nil
			return l.errorf(op, err)
		}
		return l.errorf(op, lockerr.NotHeld)
	}
	final := leftR == 0 && leftW == 0
	if final {
		// Stop renewing before the release is sent, so no renewal can
		// follow a completed unlock.
		l.o.E.WD.Remove(l.hold)
	}
	req := l.pending.id
	if req == "" {
		req = l.o.NextRequest()
	}
	keys := []string{l.o.Keys.Lock, l.o.Keys.Record(l.o.Token)}
	start := time.Now()
	res, err := l.o.Run(ctx, scripts.RWRelease, keys, l.o.Token, req, l.o.Lease().Milliseconds(),
		l.o.RecordTTL(), l.o.Keys.Channel, string(k), leftR, leftW).Int64()
	if err != nil {
		if !core.IsRedisError(err) {
			// Unknown outcome: the handle's next call resends the same
			// request (settleLocked), which the script answers as the first.
			l.pending = request{id: req, k: k}
		}
		if final && l.hold != nil {
			// Still held as far as the handle knows: keep it watched.
			l.o.E.WD.Restore(l.hold)
		}
		return l.errorf(op, err)
	}
	l.pending = request{}
	h := l.hold
	if res == 0 {
		cause := fmt.Errorf("%w: lock gone, expired or taken by another owner", lockerr.NotHeld)
		if h != nil {
			l.o.E.WD.Lose(h, cause)
		}
		l.r, l.w, l.hold = 0, 0, nil
		return l.errorf(op, cause)
	}
	l.r, l.w = leftR, leftW
	if !final {
		// The handle keeps holds, whose lease the release restarted.
		l.o.E.WD.Add(h, start, l.o.Lease(), l.o.Watched())
		return nil
	}
	l.hold = nil
	if err := l.o.E.WD.Err(h); err != nil {
		return l.errorf(op, fmt.Errorf("released after the hold was lost: %w", err))
	}
	return nil
}

package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/watchdog"
)

// Scripts is the script set of an exclusive lock type. Their KEYS and ARGV
// share one layout, to which Extension appends:
//
//	acquire KEYS lock, fence, record            ARGV token, lease ms, request, count, fencing, record ms
//	release KEYS lock, record                   ARGV token, request, lease ms, record ms, channel, final
//	abort   KEYS lock, record                   ARGV token, request, record ms, channel, count before
type Scripts struct {
	Acquire, Release, Abort *redis.Script
	// SetNX makes a new hold's first attempt a native SET NX PX (the plain
	// mutex without fencing): one cheap command when the lock is free, the
	// acquire script only when it is not (which also recognises a resent
	// SET of this owner that had succeeded).
	SetNX bool
}

// Extension is what a lock type adds to the shared exclusive machinery.
type Extension struct {
	// Keys are appended to the KEYS of every script.
	Keys []string
	// AcquireArgs are appended to the acquire ARGV; block says whether the
	// caller will wait (a fair lock queues only blocking callers).
	AcquireArgs func(block bool) []any
	// ReleaseArgs are appended to the release and abort ARGV.
	ReleaseArgs []any
	// Channel overrides the wake-up channel waited on.
	Channel string
	// MaxWait caps a single timed wait (see WaitSpec).
	MaxWait time.Duration
	// Leave runs when a blocking acquire gives up (see WaitSpec.Leave).
	Leave func(ctx context.Context) error
}

// Exclusive is the state of one handle of an exclusive lock (mutex,
// reentrant or fair): the owner, its hold count and its current hold.
// Its methods are safe for concurrent use.
type Exclusive struct {
	Owner
	scripts   Scripts
	reentrant bool
	holdKind  string
	ext       Extension

	mu      sync.Mutex
	count   int
	fence   int64
	hold    *watchdog.Hold // current hold; nil when none
	last    *watchdog.Hold // most recent hold, for Lost
	lostErr error          // why the last hold was lost, until reported
	pending string         // request id of a release with unknown outcome
}

// NewExclusive returns the handle state for an exclusive lock.
func NewExclusive(o Owner, s Scripts, reentrant bool, holdKind string, ext Extension) *Exclusive {
	return &Exclusive{Owner: o, scripts: s, reentrant: reentrant, holdKind: holdKind, ext: ext}
}

func errorf(kind, op, name string, err error) error {
	return fmt.Errorf("%s: %s %q: %w", kind, op, name, err)
}

// Lock acquires, waiting as long as ctx allows.
func (x *Exclusive) Lock(ctx context.Context) error {
	if err := x.Check(); err != nil {
		return x.errorf("lock", err)
	}
	spec := WaitSpec{
		Channel: x.Keys.Channel,
		Try:     x.attempt(true),
		MaxWait: x.ext.MaxWait,
		Leave:   x.ext.Leave,
	}
	if x.ext.Channel != "" {
		spec.Channel = x.ext.Channel
	}
	return x.E.Wait(ctx, spec)
}

// TryLock makes one attempt.
func (x *Exclusive) TryLock(ctx context.Context) (bool, error) {
	if err := x.Check(); err != nil {
		return false, x.errorf("trylock", err)
	}
	ok, _, err := x.attempt(false)(ctx)
	return ok, err
}

func (x *Exclusive) attempt(block bool) Attempt {
	first := true
	return func(ctx context.Context) (bool, time.Duration, error) {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.syncLostLocked()
		if x.pending != "" {
			// An Unlock whose outcome is unknown comes first.
			if err := x.releaseLocked(ctx); err != nil && !errors.Is(err, lockerr.NotHeld) {
				return false, 0, err
			}
		}
		if x.count > 0 && !x.reentrant {
			return false, 0, x.errorf("lock", lockerr.AlreadyHeld)
		}
		if err := lockerr.CtxGaveUp(ctx); err != nil {
			return false, 0, err
		}
		req := x.NextRequest()
		keys := append([]string{x.Keys.Lock, x.Keys.Fence, x.Keys.Record(x.Token)}, x.ext.Keys...)
		fencing := 0
		if x.Cfg.Fencing {
			fencing = 1
		}
		args := []any{x.Token, x.Lease().Milliseconds(), req, x.count, fencing, x.RecordTTL()}
		if x.ext.AcquireArgs != nil {
			args = append(args, x.ext.AcquireArgs(block)...)
		}
		start := time.Now()
		var res []int64
		var err error
		if first && x.scripts.SetNX && !x.Cfg.Fencing && x.count == 0 {
			var ok bool
			ok, err = x.E.RDB.SetNX(ctx, x.Keys.Lock, x.Token, x.Lease()).Result()
			if ok {
				res = []int64{1, 0}
			}
		}
		first = false
		if res == nil && err == nil {
			res, err = x.Run(ctx, x.scripts.Acquire, keys, args...).Int64Slice()
			if err == nil && len(res) != 2 {
				err = fmt.Errorf("unexpected reply %v", res)
			}
		}
		if err != nil {
			if !IsRedisError(err) {
				x.abortLocked(ctx, req)
			}
			if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
				return false, 0, gerr
			}
			return false, 0, x.errorf("acquire", err)
		}
		if res[0] == 1 {
			gerr := lockerr.CtxGaveUp(ctx)
			if gerr == nil && errors.Is(x.E.Usable(), lockerr.Closed) {
				gerr = lockerr.GaveUp(lockerr.Closed)
			}
			if gerr != nil {
				// Granted after the caller's ctx ended (go-redis does not
				// interrupt a command on ctx end unless told to) or the
				// client closed: give it back, as x/sync's semaphore does.
				x.abortLocked(ctx, req)
				return false, 0, gerr
			}
			x.grantedLocked(start, res[1])
			return true, 0, nil
		}
		switch res[1] {
		case -3:
			return false, 0, x.errorf("acquire", fmt.Errorf("request %s was aborted", req))
		case -4:
			cause := fmt.Errorf("%w: re-entry refused: this handle's earlier hold is gone (lease lost)", lockerr.NotHeld)
			if x.hold != nil {
				x.E.WD.Lose(x.hold, cause)
			}
			x.count, x.hold, x.lostErr = 0, nil, nil
			return false, 0, x.errorf("lock", cause)
		}
		return false, time.Duration(res[1]) * time.Millisecond, nil
	}
}

func (x *Exclusive) grantedLocked(start time.Time, fence int64) {
	x.count++
	if x.count == 1 {
		x.fence = fence
		x.hold = watchdog.NewHold(x.Keys.Lock, x.holdKind, x.Token)
		x.last, x.lostErr = x.hold, nil
	}
	// A grant (new or re-entered) set the lease to its full length.
	x.E.WD.Add(x.hold, start, x.Lease(), x.Watched())
}

// abortLocked undoes acquire request req, whose outcome is unknown, so that
// a hold obtained after the caller gave up does not stay behind.
func (x *Exclusive) abortLocked(ctx context.Context, req string) {
	cctx, cancel := Cleanup(ctx)
	defer cancel()
	keys := append([]string{x.Keys.Lock, x.Keys.Record(x.Token)}, x.ext.Keys...)
	args := append([]any{x.Token, req, x.RecordTTL(), x.Keys.Channel, x.count}, x.ext.ReleaseArgs...)
	// If this fails too, a hold it could not undo expires within a lease:
	// it is not watched.
	_ = x.Run(cctx, x.scripts.Abort, keys, args...).Err()
}

// syncLostLocked forgets a hold that the watchdog has declared lost, so the
// next Unlock reports the loss and the next Lock starts a new hold.
func (x *Exclusive) syncLostLocked() {
	if x.hold == nil {
		return
	}
	if err := x.E.WD.Err(x.hold); err != nil {
		x.count, x.hold, x.lostErr, x.pending = 0, nil, err, ""
	}
}

// Unlock releases one hold.
func (x *Exclusive) Unlock(ctx context.Context) error {
	// A closed client still lets Unlock report the loss of its holds.
	if err := x.Check(); err != nil && !errors.Is(err, lockerr.Closed) {
		return x.errorf("unlock", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.syncLostLocked()
	if x.count == 0 {
		if x.lostErr != nil {
			err := x.lostErr
			x.lostErr = nil
			return x.errorf("unlock", err)
		}
		return x.errorf("unlock", lockerr.NotHeld)
	}
	return x.releaseLocked(ctx)
}

// releaseLocked gives back one hold (the count is > 0). A release whose
// outcome is unknown stays pending: the handle's next call resends it with
// the same request id before anything else, so it is applied exactly once.
func (x *Exclusive) releaseLocked(ctx context.Context) error {
	final := x.count == 1
	if final {
		// Stop renewing before the release is sent, so no renewal can
		// follow a completed unlock.
		x.E.WD.Remove(x.hold)
	}
	req := x.pending
	if req == "" {
		req = x.NextRequest()
	}
	finalArg := 0
	if final {
		finalArg = 1
	}
	keys := append([]string{x.Keys.Lock, x.Keys.Record(x.Token)}, x.ext.Keys...)
	args := append([]any{x.Token, req, x.Lease().Milliseconds(), x.RecordTTL(), x.Keys.Channel, finalArg}, x.ext.ReleaseArgs...)
	start := time.Now()
	res, err := x.Run(ctx, x.scripts.Release, keys, args...).Int64()
	if err != nil {
		if !IsRedisError(err) {
			// Unknown outcome: a repeated Unlock resends the same request,
			// which the script answers as it answered the first.
			x.pending = req
		}
		if final {
			// Still held as far as the handle knows: keep it watched (a
			// renewal will find out if the release did happen).
			x.E.WD.Restore(x.hold)
		}
		return x.errorf("unlock", err)
	}
	x.pending = ""
	h := x.hold
	if res == 0 {
		cause := fmt.Errorf("%w: lock gone or taken by another owner", lockerr.NotHeld)
		x.E.WD.Lose(h, cause)
		x.count, x.hold = 0, nil
		return x.errorf("unlock", cause)
	}
	x.count--
	if x.count > 0 {
		x.E.WD.Add(h, start, x.Lease(), x.Watched())
		return nil
	}
	x.hold = nil
	if err := x.E.WD.Err(h); err != nil {
		return x.errorf("unlock", fmt.Errorf("released after the hold was lost: %w", err))
	}
	return nil
}

// Lost returns a channel closed when the handle's current hold is lost:
// its lease ran out, the lock was deleted or taken behind its back, or no
// renewal could be confirmed before the local deadline. A hold that ends
// by Unlock is not lost: its channel stays open. Before the first
// successful acquire, Lost returns nil (a channel that never fires).
func (x *Exclusive) Lost() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.last == nil {
		return nil
	}
	return x.last.Lost()
}

// Fence returns the fencing token of the current hold, or 0 when the
// handle holds nothing or fencing is off.
func (x *Exclusive) Fence() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.syncLostLocked()
	if x.count == 0 {
		return 0
	}
	return x.fence
}

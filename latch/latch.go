// Package latch provides a distributed count-down latch on Redis with
// Redisson's RCountDownLatch semantics: one party sets a count, others
// count it down, and every waiter is released when it reaches zero.
//
// The latch is one Redis string, relock:latch:{name}, holding the count.
// TrySetCount sets it only if no count is set; CountDown decrements it,
// and at zero deletes it and publishes a wake-up on the latch's channel
// (relock:latch:{name}), which every waiter (on any Client) receives
// through its Client's shared subscription. Wait returns as soon as the
// count is zero; its wait is also bounded by a timer (a second), so a
// lost wake-up delays a waiter and never hangs it.
//
// # Zero, and a count never set
//
// As in Redisson, a latch whose count was never set, or that reached zero
// (its key is then deleted), has count 0: Wait returns at once, and
// CountDown leaves it at 0 (it never goes below zero and creates
// nothing). After reaching zero the latch may be set again with
// TrySetCount.
//
// # TTL
//
// So that an abandoned latch does not live forever, its key has a TTL:
// DefaultTTL (24 hours) after TrySetCount and after each CountDown that
// leaves it above zero, or the duration given with relock.WithLease
// (other lock options are ignored). A latch whose TTL runs out reads as
// count 0, like an opened one, and releases its waiters: choose a TTL
// longer than the longest pause between two count-downs.
//
// # Unknown outcomes
//
// TrySetCount and CountDown are idempotent per request: a command that
// go-redis resends after a lost reply is applied once (a CountDown never
// counts twice, a TrySetCount that did set the count still reports
// true). If the call itself returns a network error, its outcome is
// unknown: calling it again (with the same count, for TrySetCount) on the
// same handle repeats the same request, which Redis answers as it did the
// first time; any other TrySetCount or CountDown of the handle first
// repeats it, so it is applied once. Each handle has a request record
// key, relock:latch:{name}:r:<token>, that Redis keeps min(TTL, 15 s)
// after the request ran, so the handle repeats a request only within
// three quarters of that time after it first sent it. A call after that
// returns an error matching ErrOutcomeUnknown and sends nothing: the
// earlier request may or may not have been applied, and no one can tell
// any more (a count-down that counts twice would open the latch early).
// The handle forgets that request; its next call is a new one.
//
// # Limits
//
// Redis keeps the count as long as it keeps the key: a restart without
// persistence, a failover that loses the write, an eviction or a FLUSH
// opens the latch early (see the relock package documentation). A waiter
// that misses the wake-up because its subscription broke retries within
// a second; if the latch was set again meanwhile, it waits for the new
// count to reach zero.
package latch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// DefaultTTL is how long a latch's key lives after it was set or last
// counted down, unless relock.WithLease sets another TTL.
const DefaultTTL = 24 * time.Hour

// MaxCount is the largest count TrySetCount accepts.
const MaxCount = math.MaxInt32

// ErrOutcomeUnknown is returned by a TrySetCount or CountDown that finds
// an earlier request of its handle whose outcome is unknown (its call
// returned a network error) and too old to be repeated safely (see
// "Unknown outcomes"). Nothing was sent; the next call is a new request.
var ErrOutcomeUnknown = errors.New("latch: outcome of an earlier request unknown, too late to repeat it")

// Latch is a handle on a named count-down latch. Handles are
// interchangeable: any handle of the name may set, count down or wait.
//
// A Latch is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable. A handle sends its TrySetCount
// and CountDown calls one at a time (its request record remembers its
// latest request only); Count and Wait run concurrently.
type Latch struct {
	o core.Owner

	mu      sync.Mutex // guards what follows, and the owner's request ids
	pending *request   // a request whose outcome is unknown
}

// request is a TrySetCount (n > 0) or CountDown (n == 0) sent to Redis.
type request struct {
	id    string
	n     int
	until time.Time // repeat it only before this: its record may be gone after
}

// New returns a handle on the latch called name. It never fails: an
// invalid name or option, or a nil client, is reported by every call, as
// an error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient. relock.WithLease sets the latch's TTL (see "TTL"
// above); other options are ignored.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Latch {
	return &Latch{o: core.NewOwner(c, "latch", name, core.Options(opts))}
}

// ttl is the latch key's TTL.
func (l *Latch) ttl() time.Duration {
	if l.o.Cfg.Lease > 0 {
		return l.o.Cfg.Lease
	}
	return DefaultTTL
}

// recordTTL is how long a request record is kept, in milliseconds.
func (l *Latch) recordTTL() int64 { return min(l.ttl(), core.MaxRecordTTL).Milliseconds() }

func (l *Latch) keys() []string { return []string{l.o.Keys.Lock, l.o.Keys.Record(l.o.Token)} }

// TrySetCount sets the count to n if no count is set (the latch was never
// set, reached zero, or expired) and reports whether it did; it returns
// false, changing nothing, if a count is set. n must lie in [1,
// MaxCount]; otherwise it returns an error matching
// relock.ErrInvalidOption.
func (l *Latch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if err := l.o.Check(); err != nil {
		return false, l.errorf("set-count", err)
	}
	if n < 1 || n > MaxCount {
		return false, l.errorf("set-count", fmt.Errorf("%w: count %d outside [1, %d]", lockerr.InvalidOption, n, MaxCount))
	}
	res, err := l.send(ctx, n)
	if err != nil {
		return false, l.errorf("set-count", err)
	}
	return res == 1, nil
}

// CountDown decrements the count; at zero it deletes the latch and wakes
// every waiter. A latch without a count stays at zero (nothing is
// created, no error).
func (l *Latch) CountDown(ctx context.Context) error {
	if err := l.o.Check(); err != nil {
		return l.errorf("count-down", err)
	}
	if _, err := l.send(ctx, 0); err != nil {
		return l.errorf("count-down", err)
	}
	return nil
}

// send sends a TrySetCount of n, or a CountDown when n is 0: the request
// whose outcome is unknown, if it is the same call, or else that request
// first (to settle it) and then a new one.
func (l *Latch) send(ctx context.Context, n int) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.pending; p != nil && !time.Now().Before(p.until) {
		l.pending = nil
		return 0, ErrOutcomeUnknown
	}
	if p := l.pending; p != nil && p.n != n {
		if _, err := l.run(ctx, p); err != nil {
			return 0, err
		}
	}
	r := l.pending
	if r == nil {
		// The record lives recordTTL after the script ran, which is after
		// now; a repeat must reach Redis before that, so keep a margin.
		ttl := time.Duration(l.recordTTL()) * time.Millisecond
		r = &request{id: l.o.NextRequest(), n: n, until: time.Now().Add(ttl * 3 / 4)}
	}
	return l.run(ctx, r)
}

// run sends r; a network error (unknown outcome) keeps it pending.
func (l *Latch) run(ctx context.Context, r *request) (int64, error) {
	var res int64
	var err error
	if r.n > 0 {
		res, err = l.o.Run(ctx, scripts.LatchSet, l.keys(), r.n, l.ttl().Milliseconds(), r.id, l.recordTTL()).Int64()
	} else {
		res, err = l.o.Run(ctx, scripts.LatchCountDown, l.keys(), r.id, l.recordTTL(), l.ttl().Milliseconds(),
			l.o.Keys.Channel).Int64()
	}
	if err != nil {
		if !core.IsRedisError(err) {
			l.pending = r
		}
		return 0, err
	}
	l.pending = nil
	return res, nil
}

// Count returns the count now (one GET): 0 when no count is set.
func (l *Latch) Count(ctx context.Context) (int, error) {
	if err := l.o.Check(); err != nil {
		return 0, l.errorf("count", err)
	}
	n, err := l.count(ctx)
	if err != nil {
		return 0, l.errorf("count", err)
	}
	return n, nil
}

func (l *Latch) count(ctx context.Context) (int, error) {
	n, err := l.o.E.RDB.Get(ctx, l.o.Keys.Lock).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Wait returns nil once the count is zero (at once if it is zero now, or
// was never set), woken by the CountDown that reaches zero. On ctx end it
// returns an error matching ctx.Err() (and relock.ErrNotObtained), and
// nothing is left subscribed; when the Client is closed, one matching
// relock.ErrClosed. A Redis error while it checks the count ends the wait
// with that error.
func (l *Latch) Wait(ctx context.Context) error {
	if err := l.o.Check(); err != nil {
		return l.errorf("wait", err)
	}
	err := l.o.E.Wait(ctx, core.WaitSpec{Channel: l.o.Keys.Channel}, core.WaitFuncs{
		AttemptFunc: func(ctx context.Context) (bool, time.Duration, error) {
			n, err := l.count(ctx)
			if err != nil {
				if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
					return false, 0, gerr
				}
				return false, 0, err
			}
			return n == 0, core.Unknown, nil
		},
	})
	if err != nil {
		return l.errorf("wait", err)
	}
	return nil
}

// Name returns the latch's name.
func (l *Latch) Name() string { return l.o.Name }

func (l *Latch) errorf(op string, err error) error {
	return fmt.Errorf("latch: %s %q: %w", op, l.o.Name, err)
}

package locktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// recorder collects a Client's events and log output.
type recorder struct {
	mu     sync.Mutex
	events []relock.Event
	log    bytes.Buffer
}

func (r *recorder) observe(e relock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

// take returns the events of the given types seen so far and forgets all.
func (r *recorder) take(types ...relock.EventType) []relock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []relock.Event
	for _, e := range r.events {
		for _, t := range types {
			if e.Type == t {
				out = append(out, e)
			}
		}
	}
	r.events = nil
	return out
}

func (r *recorder) logged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

var fingerprint = regexp.MustCompile(`^[0-9a-f]{8}$`)

// Events checks what observers and the logger are told: one
// EventAcquired per new hold (not per re-entry) and one EventReleased or
// EventLost at its end, EventFailed for an acquire that gave up, with the
// kind, name, mode and owner fingerprint; the logger warns of losses and
// of failures other than a ctx ending; no owner token anywhere, here and
// on every failure path of NoTokens (subtest "failures").
func Events(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rec := &recorder{}
		logger := slog.New(slog.NewTextHandler(rec, nil))
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(time.Second), // 300 ms lapsed on a loaded machine
			relock.WithObserver(rec.observe), relock.WithLogger(logger))
		admin := s.Admin(t) // reads tokens with commands relock does not send
		name := redistest.Name(t)
		a, b := k.New(c, name), k.waiter(c, name)
		var tokens []string
		var errs []error

		// A hold, re-entered once if the kind allows: one acquired, one
		// released.
		require.NoError(t, a.Lock(ctx))
		tokens = append(tokens, k.Tokens(ctx, admin, name)...)
		if k.Reentrant {
			require.NoError(t, a.Lock(ctx))
			require.NoError(t, a.Unlock(ctx))
		}
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, a.Unlock(ctx))
		evs := rec.take(relock.EventAcquired, relock.EventReleased, relock.EventFailed, relock.EventLost)
		require.Len(t, evs, 2, "events of one hold: %+v", evs)
		assert.Equal(t, relock.EventAcquired, evs[0].Type)
		assert.Equal(t, relock.EventReleased, evs[1].Type)
		for _, e := range evs {
			assert.Equal(t, k.Type, e.Kind)
			assert.Equal(t, name, e.Name)
			assert.Equal(t, k.Mode, e.Mode)
			assert.Regexp(t, fingerprint, e.Owner)
			assert.NoError(t, e.Err)
		}
		assert.Equal(t, evs[0].Owner, evs[1].Owner, "one owner, two fingerprints")
		assert.Equal(t, 1, evs[0].Attempts, "attempts of an acquire of a free lock")
		assert.False(t, evs[0].Granted, "an acquire of a free lock was handed over")
		assert.Equal(t, ctx, evs[0].Ctx, "the acquire's ctx")
		assert.GreaterOrEqual(t, evs[1].Held, 5*time.Millisecond, "Held of a hold of 5 ms or more")
		ownerA := evs[0].Owner

		// A contended acquire reports how long it waited, and how: more
		// attempts, or a hand-over; its ctx (a caller's trace) comes along.
		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		type ctxKey struct{}
		bctx := context.WithValue(ctx, ctxKey{}, "b's request")
		began := make(chan time.Time, 1)
		go func() {
			began <- time.Now()
			got <- b.Lock(bctx)
		}()
		time.Sleep(100 * time.Millisecond)
		unlocking := time.Now()
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-got)
		// At least from its call to a's Unlock (not the 100 ms: CI once
		// started the goroutine 12 ms late).
		waited := unlocking.Sub(<-began)
		tokens = append(tokens, k.Tokens(ctx, admin, name)...)
		require.NoError(t, b.Unlock(ctx))
		evs = rec.take(relock.EventAcquired)
		require.Len(t, evs, 2)
		assert.NotEqual(t, ownerA, evs[1].Owner, "two handles, one fingerprint")
		assert.GreaterOrEqual(t, evs[1].Wait, waited-5*time.Millisecond, "Wait of an acquire that waited %v", waited)
		assert.True(t, evs[1].Attempts > 1 || evs[1].Granted, "a wait of %d attempts, granted %v", evs[1].Attempts, evs[1].Granted)
		if assert.NotNil(t, evs[1].Ctx) {
			assert.Equal(t, "b's request", evs[1].Ctx.Value(ctxKey{}), "the acquire's ctx")
		}
		rec.take()

		// An acquire that gives up, and a TryLock that finds the lock held
		// (not a failure).
		require.NoError(t, a.Lock(ctx))
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := b.Lock(wctx)
		cancel()
		require.ErrorIs(t, err, relock.ErrNotObtained)
		errs = append(errs, err)
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		evs = rec.take(relock.EventFailed)
		require.Len(t, evs, 1, "failed acquires: %+v", evs)
		assert.ErrorIs(t, evs[0].Err, relock.ErrNotObtained)
		assert.ErrorIs(t, evs[0].Err, context.DeadlineExceeded)
		assert.GreaterOrEqual(t, evs[0].Wait, 90*time.Millisecond)
		assert.Equal(t, k.Type, evs[0].Kind)

		// A loss (an operator deleted the key): one lost event, logged; the
		// refused acquires and unlocks that follow add no second one.
		require.NoError(t, rdb.Del(ctx, k.Key(name)).Err())
		select {
		case <-a.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("Lost did not fire")
		}
		err = a.Lock(ctx)
		require.ErrorIs(t, err, relock.ErrNotHeld)
		errs = append(errs, err)
		err = a.Unlock(ctx)
		require.ErrorIs(t, err, relock.ErrNotHeld)
		errs = append(errs, err)
		lost := rec.take(relock.EventLost)
		require.Len(t, lost, 1, "lost events")
		assert.ErrorIs(t, lost[0].Err, relock.ErrNotHeld)
		assert.ErrorIs(t, lost[0].Err, relock.ErrLockGone, "a deleted key")
		assert.Equal(t, ownerA, lost[0].Owner)
		assert.Positive(t, lost[0].Held)

		// Closing the Client loses what is held.
		require.NoError(t, a.Lock(ctx))
		tokens = append(tokens, k.Tokens(ctx, admin, name)...)
		require.NoError(t, c.Close())
		lost = rec.take(relock.EventLost)
		require.Len(t, lost, 1, "lost events after Close")
		assert.ErrorIs(t, lost[0].Err, relock.ErrClosed)
		assert.NotErrorIs(t, lost[0].Err, relock.ErrLockGone)
		err = a.Unlock(ctx)
		require.ErrorIs(t, err, relock.ErrNotHeld)
		errs = append(errs, err)

		logged := rec.logged()
		assert.Contains(t, logged, "relock: hold lost")
		assert.Contains(t, logged, "kind="+k.Type)
		assert.Contains(t, logged, "owner="+ownerA)
		assert.Contains(t, logged, "relock: acquire failed", "a refused acquire (not a ctx end) is logged")
		assert.NotContains(t, logged, "DeadlineExceeded", "a ctx end is logged")
		assert.NotContains(t, logged, "deadline exceeded", "a ctx end is logged")

		require.NotEmpty(t, tokens)
		for _, tok := range tokens {
			require.GreaterOrEqual(t, len(tok), 32, "not a token: %q", tok)
			assert.NotContains(t, logged, tok, "a token in the log")
			for _, err := range errs {
				assert.NotContains(t, err.Error(), tok, "a token in an error")
			}
			assert.NotContains(t, fmt.Sprintf("%+v", rec.take()), tok, "a token in an event")
		}
	})
	redistest.Subtest(t, "failures", func(t *testing.T) { NoTokens(t, k) })
}

// ObserverPanics checks that an observer that panics neither breaks the
// call that reported the event nor corrupts the lock, that the next
// observer still gets the event, and that the panic is logged.
func ObserverPanics(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rec := &recorder{}
		c, _ := redistest.NewClient(t, s,
			relock.WithObserver(func(relock.Event) { panic("observer bug") }),
			relock.WithObserver(rec.observe),
			relock.WithLogger(slog.New(slog.NewTextHandler(rec, nil))))
		name := redistest.Name(t)
		a, b := k.New(c, name), k.waiter(c, name)
		require.NoError(t, a.Lock(ctx))
		assert.True(t, a.Held())
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "the lock is not held after a panicking observer")
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, b.Lock(ctx))
		require.NoError(t, b.Unlock(ctx))
		assert.Len(t, rec.take(relock.EventAcquired, relock.EventReleased), 4, "the second observer missed events")
		assert.True(t, strings.Contains(rec.logged(), "observer panicked"), "the panic was not logged")
		assert.Empty(t, k.Tokens(ctx, s.Admin(t), name), "the lock is left held")
	})
}

// ObserverRelocks: an observer told of a loss by the watchdog's own
// goroutine (a renewal found the lock gone) pays the owed Unlock and
// locks again at once, as the observers' doc allows; the new attempt does
// not wait for that goroutine, which must go on renewing the Client's
// other holds.
func ObserverRelocks(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		var h Handle
		relocked := make(chan error, 1)
		observe := func(e relock.Event) {
			if e.Type != relock.EventLost || e.Name != name {
				return
			}
			_ = h.Unlock(ctx) // owed after the loss
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			start := time.Now()
			ok, err := h.TryLock(tctx)
			if err == nil && !ok {
				err = errors.New("refused")
			}
			if err == nil && time.Since(start) > time.Second {
				err = fmt.Errorf("took %v", time.Since(start))
			}
			relocked <- err
		}
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(time.Second), relock.WithObserver(observe))
		h = k.New(c, name)
		bystander := k.New(c, name+".bystander")
		require.NoError(t, bystander.Lock(ctx))
		require.NoError(t, h.Lock(ctx))
		deleteLock(t, s, name)
		select {
		case err := <-relocked:
			require.NoError(t, err, "the observer's TryLock after the loss")
		case <-time.After(5 * time.Second):
			t.Fatal("the loss was not observed")
		}
		assert.True(t, h.Held())
		time.Sleep(1500 * time.Millisecond) // past the bystander's first lease
		assert.True(t, bystander.Held(), "the watchdog stopped renewing the Client's other holds")
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, bystander.Unlock(ctx))
	})
}

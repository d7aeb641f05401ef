package locktest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// failures collects what a lock says about its failures, and the owner
// tokens it must never say.
type failures struct {
	t      *testing.T
	k      Kind
	admin  redis.UniversalClient
	name   string
	errs   []error
	tokens map[string]bool
}

// note keeps err (if any) and checks that it matches want (if given).
func (f *failures) note(err error, want ...error) {
	f.t.Helper()
	for _, w := range want {
		assert.ErrorIs(f.t, err, w)
	}
	if err != nil {
		f.errs = append(f.errs, err)
	}
}

// seen records the tokens Redis now has for the lock: its holders', and
// its waiters' (a queue entry starts with the waiter's token).
func (f *failures) seen(ctx context.Context) {
	for _, tok := range f.k.Tokens(ctx, f.admin, f.name) {
		f.tokens[tok] = true
	}
	for _, e := range f.admin.ZRange(ctx, f.k.Key(f.name)+":queue", 0, -1).Val() {
		tok, _, _ := strings.Cut(e, "|")
		f.tokens[tok] = true
	}
}

// NoTokens drives a lock through its failure paths — unlock of a lock not
// held, lock of a held mutex (ErrAlreadyHeld), a wait that ends with its
// ctx or a cancelled ctx, a hold lost to an operator's delete and the
// refused calls after it, a fixed lease that ran out, a key of the wrong
// type, a lost reply, a Client closed under a holder and a waiter, and on
// a real server too few replicas (ErrNotReplicated) and a user without
// key rights (NOPERM) — and checks that no owner token of a holder or a
// waiter (read from Redis) appears in an error, a LostErr, an event or a
// line that WithLogger logs (at any level).
func NoTokens(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rec := &recorder{}
		logger := slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// Renewals every 667 ms: a lease of 300 ms was lost on a loaded
		// machine, and the waiter below got the lock; one of 1 s ran out
		// in CI63's loaded first pass before the Client was closed.
		opts := []relock.Option{relock.WithWatchdogTimeout(2 * time.Second),
			relock.WithObserver(rec.observe), relock.WithLogger(logger)}
		c, _ := redistest.NewClient(t, s, opts...)
		name := redistest.Name(t)
		f := &failures{t: t, k: k, admin: s.Admin(t), name: name, tokens: map[string]bool{}}
		h, w := k.New(c, name), k.waiter(c, name)

		// Unlocks of a lock not held; a mutex locked twice.
		f.note(h.Unlock(ctx), relock.ErrNotHeld)
		require.NoError(t, h.Lock(ctx))
		f.seen(ctx)
		if k.Type == "mutex" { // a semaphore's holder may wait for more
			f.note(h.Lock(ctx), relock.ErrAlreadyHeld)
			_, err := h.TryLock(ctx)
			f.note(err, relock.ErrAlreadyHeld)
		}
		f.note(w.Unlock(ctx), relock.ErrNotHeld)

		// A wait that ends with its ctx (queued meanwhile), and one whose
		// ctx ended before it began.
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		got := lockAsync(wctx, w)
		time.Sleep(150 * time.Millisecond)
		f.seen(ctx)
		f.note(await(t, got, 3*time.Second, "a wait whose ctx ends"), relock.ErrNotObtained, context.DeadlineExceeded)
		cancel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		f.note(w.Lock(cctx), context.Canceled)

		// A hold deleted by an operator: lost; the calls it owes.
		require.NoError(t, f.admin.Del(ctx, k.Key(name)).Err())
		waitLost(t, h)
		f.note(h.LostErr(), relock.ErrNotHeld, relock.ErrLockGone)
		f.note(h.Lock(ctx), relock.ErrNotHeld)
		f.note(h.Unlock(ctx), relock.ErrNotHeld)

		// A fixed lease that ran out.
		short := k.New(c, name, relock.WithLease(50*time.Millisecond))
		require.NoError(t, short.Lock(ctx))
		f.seen(ctx)
		waitLost(t, short)
		f.note(short.LostErr(), relock.ErrNotHeld, relock.ErrLeaseExpired)
		f.note(short.Unlock(ctx), relock.ErrNotHeld, relock.ErrLeaseExpired)

		// A key of the wrong type where the lock lives. (The mutex's first
		// attempt, SET NX, just finds the key taken.)
		require.NoError(t, f.admin.Del(ctx, k.Key(name)).Err())
		require.NoError(t, f.admin.RPush(ctx, k.Key(name), "not a lock").Err())
		wrong := k.New(c, name)
		_, err := wrong.TryLock(ctx)
		f.note(err)
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		f.note(wrong.Lock(lctx))
		cancel()
		assert.False(t, wrong.Held(), "a lock taken over a key of the wrong type")
		require.NoError(t, f.admin.Del(ctx, k.Key(name)).Err())

		// A release whose reply is lost.
		faults := &redistest.Faults{}
		frdb := s.Client(t)
		redistest.AddHook(frdb, faults)
		fc := relock.New(frdb, opts...)
		t.Cleanup(func() { _ = fc.Close() })
		lossy := k.New(fc, name)
		require.NoError(t, lossy.Lock(ctx))
		f.seen(ctx)
		faults.LoseReplies(true)
		f.note(lossy.Unlock(ctx), redistest.ErrInjected)
		faults.LoseReplies(false)
		require.NoError(t, lossy.Unlock(ctx), "the repeated release")

		if s.Real() && s.Cluster == nil { // one server: no replica, its own users
			// Too few replicas (there are none).
			nr := k.New(c, name, relock.WithSyncReplicas(1, 10*time.Millisecond))
			f.note(nr.Lock(ctx), relock.ErrNotReplicated)
			_, err := nr.TryLock(ctx)
			f.note(err, relock.ErrNotReplicated)

			// A user allowed every command but none of relock's keys.
			u := redistest.NewUser(t, s, "~other:* &relock:* +@all")
			uc := relock.New(u.Client(t), opts...)
			t.Cleanup(func() { _ = uc.Close() })
			np := k.New(uc, name)
			err = np.Lock(ctx)
			assert.ErrorContains(t, err, "NOPERM")
			f.note(err)
			_, err = np.TryLock(ctx)
			assert.ErrorContains(t, err, "NOPERM")
			f.note(err)
		}

		// A Client closed under a holder and a waiter.
		require.NoError(t, h.Lock(ctx))
		got = lockAsync(ctx, w)
		time.Sleep(150 * time.Millisecond)
		f.seen(ctx)
		require.NoError(t, c.Close())
		f.note(await(t, got, 3*time.Second, "a wait whose Client closes"), relock.ErrNotObtained, relock.ErrClosed)
		f.note(h.LostErr(), relock.ErrNotHeld, relock.ErrClosed)
		f.note(h.Unlock(ctx), relock.ErrNotHeld)
		f.note(h.Lock(ctx), relock.ErrClosed)
		_, err = w.TryLock(ctx)
		f.note(err, relock.ErrClosed)

		require.GreaterOrEqual(t, len(f.tokens), 2, "tokens of a holder and a waiter")
		said := []string{rec.logged(), fmt.Sprintf("%+v", rec.take())}
		for _, err := range f.errs {
			said = append(said, fmt.Sprintf("%+v", err))
			said = appendTexts(said, err)
		}
		for tok := range f.tokens {
			require.GreaterOrEqual(t, len(tok), 32, "not a token: %q", tok)
			for _, text := range said {
				// Half a token is still too much.
				assert.NotContains(t, text, tok[:16], "an owner token shown")
			}
		}
		assert.NotEmpty(t, rec.logged(), "nothing logged")
	})
}

// waitLost waits until h's hold is lost.
func waitLost(t *testing.T, h Handle) {
	t.Helper()
	select {
	case <-h.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("Lost did not fire")
	}
}

// appendTexts appends the message of err and of every error it wraps.
func appendTexts(out []string, err error) []string {
	if err == nil {
		return out
	}
	out = append(out, err.Error())
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out = appendTexts(out, u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = appendTexts(out, e)
		}
	}
	return out
}

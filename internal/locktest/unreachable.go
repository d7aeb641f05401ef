package locktest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// WaitUnreachable: a Lock that waits for a held lock returns the error
// when Redis starts refusing its connections (see the bounds below),
// instead of waiting on, as the lock types' docs say; once Redis is back,
// what the waiter left (its give-back was refused too) keeps nobody out
// for longer than its heartbeat.
func WaitUnreachable(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		hc, _ := redistest.NewClient(t, s)
		r := new(redistest.Refuser)
		wc := relock.New(s.Client(t, r.Options))
		t.Cleanup(func() { _ = wc.Close() })
		name := redistest.Name(t)
		h := k.New(hc, name)
		require.NoError(t, h.Lock(ctx))
		w := k.waiter(wc, name, relock.WithHeartbeat(time.Second))
		done := make(chan error, 1)
		go func() { done <- w.Lock(ctx) }()
		time.Sleep(300 * time.Millisecond) // waiting, subscribed
		select {
		case err := <-done:
			t.Fatalf("Lock returned while the lock was held: %v", err)
		default:
		}
		// Its next attempt comes within a wait's cap (1 s) and fails at
		// once with go-redis 9.7 (0.2-0.3 s in all), after its dial
		// retries with newer releases, which retry a refused dial (5.1-5.2
		// s in all with 9.23); on a Cluster a call refused a connection is
		// sent again after the view reloads, for up to 10 s, and then the
		// give-back is tried for up to 5 s (15.1-15.3 s with 9.7).
		bound := 12 * time.Second
		if s.Cluster != nil {
			bound = 25 * time.Second
		}
		r.Refuse()
		refused := time.Now()
		select {
		case err := <-done:
			t.Logf("Lock returned %v after Redis began refusing: %v", time.Since(refused).Round(time.Millisecond), err)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED, "Lock's error is Redis's")
			assert.NotErrorIs(t, err, relock.ErrNotObtained, "not a ctx's end")
		case <-time.After(bound):
			t.Fatalf("Lock kept waiting %v while Redis refused connections", bound)
		}
		r.Accept()
		require.NoError(t, h.Unlock(ctx))
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		other := k.waiter(hc, name)
		require.NoError(t, other.Lock(lctx), "the waiter's leftovers kept the lock from others")
		require.NoError(t, other.Unlock(ctx))
	})
}

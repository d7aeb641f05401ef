package locktest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// WaitBoundedByLease checks the documented bound on a timed wait: a
// waiter whose holder neither unlocks nor renews (its fixed lease simply
// runs out) waits about the holder's remaining lease, not the one-second
// cap on a wait of unknown length. Many waiters, each on its own holder,
// make it likely that some attempt lands in a holder's last millisecond
// (which the scripts once reported as "unknown"). Its 60 clients load the
// machine, and its bound would measure the load of tests beside it: it
// runs alone.
func WaitBoundedByLease(t *testing.T, k Kind) {
	redistest.Exclusive(t, "60 clients under a timing bound: it loads, and measures the load of, the tests beside it")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const (
			lease   = 20 * time.Millisecond
			waiters = 30
			rounds  = 3
			// Generous for a loaded 2-core machine (30 waiters and 30
			// holders on miniredis under -race took up to 470 ms with a
			// busy loop beside, 730 ms beside other test binaries), below
			// the one-second cap that a wait of unknown length waits.
			margin = 800 * time.Millisecond
		)
		hc, _ := redistest.NewClient(t, s)
		wc, _ := redistest.NewClient(t, s)
		var mu sync.Mutex
		var longest time.Duration
		for r := 0; r < rounds; r++ {
			var wg sync.WaitGroup
			for i := 0; i < waiters; i++ {
				name := fmt.Sprintf("%s.%d.%d", redistest.Name(t), r, i)
				holder, waiter := k.New(hc, name, relock.WithLease(lease)), k.waiter(wc, name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !assert.NoError(t, holder.Lock(ctx), "the holder's Lock") {
						return
					}
					begin := time.Now()
					err := waiter.Lock(ctx)
					waited := time.Since(begin)
					mu.Lock()
					longest = max(longest, waited)
					mu.Unlock()
					if !assert.NoError(t, err, "the waiter's Lock") {
						return
					}
					assert.Less(t, waited, lease+margin,
						"round %d, waiter %d: waited longer than the holder's lease (%v) and a margin", r, i, lease)
					assert.True(t, waiter.Held())
					assert.NoError(t, waiter.Unlock(ctx))
				}()
			}
			wg.Wait()
			require.False(t, t.Failed())
		}
		t.Logf("the longest wait of %d: %v (lease %v)", rounds*waiters, longest, lease)
	})
}

// WaitExpiryMidScript checks a waiter whose attempt saw the holder's key
// and then found it expired within the same script: it tries again at
// once, not after the one-second cap on a wait of unknown length. Only
// miniredis does this (its clock runs on while a script runs; Redis's
// stands still): thousands of keys make each of its commands slow (it
// sorts all its keys on every command, a script's included), and holders'
// leases spread over the length of a script make some expire in the
// middle of one. That keeps a core busy, under a timing bound: it runs
// alone.
func WaitExpiryMidScript(t *testing.T, k Kind) {
	redistest.Exclusive(t, "a miniredis of 5000 keys keeps a core busy, under a timing bound")
	m := miniredis.RunT(t)
	for i := 0; i < 5000; i++ {
		require.NoError(t, m.Set(fmt.Sprintf("filler.%d", i), "x"))
	}
	m.ClockTTL(true) // after the filling, each Set of which it would slow
	s := &redistest.Server{Addr: m.Addr(), Mini: m}
	ctx := testCtx(t)
	// A Lock takes about 100 ms here, more on a loaded machine (700-900
	// ms beside other test binaries); a wait of unknown length is a second
	// more, and with the Lock's own time always above lease + margin.
	const margin = 950 * time.Millisecond
	hc, _ := redistest.NewClient(t, s)
	wc, _ := redistest.NewClient(t, s)
	for i := 0; i < 15; i++ {
		lease := 10*time.Millisecond + time.Duration(i)*5*time.Millisecond
		name := fmt.Sprintf("%s.%d", redistest.Name(t), i)
		holder, waiter := k.New(hc, name, relock.WithLease(lease)), k.waiter(wc, name)
		require.NoError(t, holder.Lock(ctx), "the holder's Lock")
		begin := time.Now()
		require.NoError(t, waiter.Lock(ctx), "the waiter's Lock")
		waited := time.Since(begin)
		t.Logf("holder's lease %v: the waiter waited %v", lease, waited)
		assert.Less(t, waited, lease+margin, "lease %v: waited longer than the holder's lease and a margin", lease)
		require.NoError(t, waiter.Unlock(ctx))
	}
}

// WaitLastMillisecond: a waiter refused by a holder in its last
// millisecond (PTTL 0) tries again about a millisecond later, not after
// the one-second cap on a wait of unknown length (the scripts once
// reported 0 then, which the wait took for "unknown"). Deterministic, on a
// miniredis of its own whose TTLs stand still until the test moves them:
// the holder's key stays in its last millisecond until FastForward ends
// it. For the lock types whose refusal reports the lock key's PTTL (mutex,
// reentrant, fair); an rwlock's and a semaphore's report their owners'
// expiries by the server's clock, through the same core.WaitFor, which
// WaitBoundedByLease covers.
func WaitLastMillisecond(t *testing.T, k Kind) {
	m := miniredis.RunT(t)
	m.ClockTTL(false)
	s := &redistest.Server{Addr: m.Addr(), Mini: m}
	ctx := testCtx(t)
	hc, _ := redistest.NewClient(t, s)
	wc, _ := redistest.NewClient(t, s)
	name := redistest.Name(t)
	holder, waiter := k.New(hc, name, relock.WithLease(time.Hour)), k.waiter(wc, name)
	require.NoError(t, holder.Lock(ctx))
	m.SetTTL(k.Key(name), 500*time.Microsecond)
	got := redistest.Async(func() error { return waiter.Lock(ctx) })
	time.Sleep(200 * time.Millisecond) // refused (PTTL 0), and waiting
	require.True(t, m.Exists(k.Key(name)), "the holder's key")
	m.FastForward(time.Millisecond)
	expired := time.Now()
	r := redistest.Await(t, got, 3*time.Second, "the waiter's Lock")
	require.NoError(t, r.Err)
	waited := r.At.Sub(expired)
	t.Logf("the waiter had the lock %v after the holder's key expired", waited)
	assert.Less(t, waited, 500*time.Millisecond, "a waiter waited out the cap on a holder in its last millisecond")
	require.NoError(t, waiter.Unlock(ctx))
}

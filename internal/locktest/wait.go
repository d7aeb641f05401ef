package locktest

import (
	"fmt"
	"sync"
	"testing"
	"time"

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
// (which the scripts once reported as "unknown").
func WaitBoundedByLease(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const (
			lease   = 20 * time.Millisecond
			waiters = 30
			rounds  = 3
			// Generous for a loaded 2-core machine, far below the
			// one-second cap.
			margin = 300 * time.Millisecond
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

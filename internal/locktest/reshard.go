package locktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// ClusterReshard migrates the slots of locks back and forth between the
// two masters of a cluster of the test's own, key by key (so that the
// slots stay half-moved for a while: ASK and TRYAGAIN replies), while
// two Clients take and release those locks in a loop and a third holds
// other locks of the same slots on its watchdog (lease 1 s) across every
// move. No two owners may be inside one lock at once (an oracle in the
// test), no call may fail or stay stuck, the long holds must never be
// lost (their renewals follow their slots to the new master), and no
// key of the locks but short-lived request records may be left at the
// end.
func ClusterReshard(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	s := &redistest.Server{Addr: cl.Nodes[0].Addr, Cluster: cl}
	ctx := testCtx(t)
	admin := s.Admin(t).(*redis.ClusterClient)
	a, b := cl.Nodes[0], cl.Nodes[1]
	base := redistest.Name(t)

	// Two hash tags whose slots start on a; four locks in each slot.
	type group struct {
		slot  int64
		names []string
	}
	var groups []group
	for i := 0; len(groups) < 2; i++ {
		prefix := base + "{" + strconv.Itoa(i) + "}."
		m, err := admin.MasterForKey(ctx, k.Key(prefix+"0"))
		require.NoError(t, err)
		if m.Options().Addr != a.Addr {
			continue
		}
		slot, err := admin.ClusterKeySlot(ctx, k.Key(prefix+"0")).Result()
		require.NoError(t, err)
		g := group{slot: slot}
		for j := 0; j < 4; j++ {
			g.names = append(g.names, prefix+strconv.Itoa(j))
			other, err := admin.ClusterKeySlot(ctx, k.Key(g.names[j])).Result()
			require.NoError(t, err)
			require.Equal(t, slot, other, "%s is not in the slot of its hash tag", g.names[j])
		}
		groups = append(groups, g)
	}

	lease := relock.WithWatchdogTimeout(time.Second)
	holder, _ := redistest.NewClient(t, s, lease)
	var held []Handle
	var contended []string
	for _, g := range groups {
		h := k.New(holder, g.names[0])
		require.NoError(t, h.Lock(ctx))
		held = append(held, h)
		contended = append(contended, g.names[1:]...)
	}

	// The workers: three goroutines on each of two Clients.
	inside := make(map[string]*atomic.Int32, len(contended))
	for _, name := range contended {
		inside[name] = new(atomic.Int32)
	}
	var (
		stop            atomic.Bool
		cycles, doubles atomic.Int64
		mu              sync.Mutex
		failures        []string
		wg              sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	for w := 0; w < 2; w++ {
		c, _ := redistest.NewClient(t, s, lease)
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					name := contended[rand.IntN(len(contended))]
					h := k.New(c, name)
					lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := h.Lock(lctx)
					cancel()
					if err != nil {
						fail("Lock of %s: %v", name, err)
						continue
					}
					if inside[name].Add(1) != 1 {
						doubles.Add(1)
					}
					time.Sleep(time.Millisecond)
					inside[name].Add(-1)
					cycles.Add(1)
					uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					if err := h.Unlock(uctx); err != nil {
						fail("Unlock of %s: %v", name, err)
					}
					cancel()
				}
			}()
		}
	}

	// The moves: every slot to b and back to a, keys 5 ms apart (the
	// slots hold the locks' request records too), for at least four
	// leases of the long holds.
	start := time.Now()
	moves := 0
	for round := 0; round < 3 || time.Since(start) < 4*time.Second; round++ {
		for _, hop := range [][2]*redistest.ClusterNode{{a, b}, {b, a}} {
			for _, g := range groups {
				require.NoError(t, cl.Migrate(ctx, g.slot, hop[0], hop[1], 5*time.Millisecond), "moving slot %d", g.slot)
				moves++
			}
		}
	}
	elapsed := time.Since(start)
	time.Sleep(500 * time.Millisecond) // a last stretch on settled slots
	stop.Store(true)
	wg.Wait()
	t.Logf("%d moves in %v; %d cycles of %d locks", moves, elapsed.Round(time.Millisecond), cycles.Load(), len(contended))

	assert.Zero(t, doubles.Load(), "two owners inside one lock at once")
	assert.Empty(t, failures, "calls that failed during the moves")
	assert.Positive(t, cycles.Load())
	for i, h := range held {
		select {
		case <-h.Lost():
			t.Errorf("the hold of %s was lost across the moves: %v", groups[i].names[0], h.LostErr())
		default:
		}
		assert.NoError(t, h.Unlock(ctx), "Unlock of %s", groups[i].names[0])
	}

	// Nothing of the locks is left but request records.
	var left []string
	err := admin.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		iter := m.Scan(ctx, 0, "relock:*"+base+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if !strings.Contains(iter.Val(), ":r:") {
				mu.Lock()
				left = append(left, iter.Val())
				mu.Unlock()
			}
		}
		return iter.Err()
	})
	require.NoError(t, err)
	assert.Empty(t, left, "keys left after every holder and waiter is gone")
}

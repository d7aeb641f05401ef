package watchdog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/watchdog"
)

// servers runs f on the addresses of n healthy servers: miniredis ones,
// and real redis-servers (the package's and some of the test's own), side
// by side in a test marked redistest.Parallel. mini says which: see
// miniLocks.
func servers(t *testing.T, n int, f func(t *testing.T, addrs []string, mini bool)) {
	redistest.Subtest(t, "miniredis", func(t *testing.T) {
		var addrs []string
		for range n {
			m := miniredis.RunT(t)
			m.ClockTTL(true)
			addrs = append(addrs, m.Addr())
		}
		f(t, addrs, true)
	})
	redistest.Subtest(t, "redis", func(t *testing.T) {
		addrs := []string{redistest.Real(t).Addr}
		for len(addrs) < n {
			addrs = append(addrs, redistest.StartServer(t).Addr)
		}
		f(t, addrs, false)
	})
}

// miniLocks is how many locks the Ring tests hold on miniredis servers.
// With its TTLs running (ClockTTL), miniredis sorts all its keys on every
// command, each that a script calls included: a renewal round of 100
// holds a shard took up to 0.9 s under -race on a loaded machine, past
// the tests' 900 ms lease, and every hold was lost ("no renewal confirmed
// before the local deadline"). 40 locks still spread over every shard,
// and still tell one call per shard from one per lock.
const miniLocks = 40

// ringLease is the Ring tests' lease: renewals every third of it. With a
// shard down the watchdog sends one script call per lock (see shardKey),
// and beside other test binaries, under -race, a round of 40 calls took
// 0.9-1 s on miniredis (about 25 ms a call: its Lua interpreter), and
// rounds of 100 on redis-server missed 900 ms too: holds were lost with
// no round failed (they came late).
func ringLease(mini bool) time.Duration {
	if mini {
		return 4 * time.Second
	}
	return 2 * time.Second
}

// closedAddr returns a loopback address that refuses connections (a
// port merely free was taken by a server of a test beside it, and the
// "down" shard was up).
func closedAddr(t testing.TB) string { return redistest.ClosedAddr(t) }

// watchRing sets n mutex keys through ring, watches them with a watchdog
// renewing to lease, and returns their holds.
func watchRing(t *testing.T, ring *redis.Ring, w *watchdog.Watchdog, n int, lease time.Duration) []*watchdog.Hold {
	ctx := context.Background()
	name := redistest.Name(t)
	var holds []*watchdog.Hold
	for i := range n {
		key := fmt.Sprintf("relock:mutex:{%s.%d}", name, i)
		require.NoError(t, ring.Set(ctx, key, "token", lease).Err())
		h := watchdog.NewHold(key, watchdog.KindString, "token")
		_ = w.Add(h, time.Now(), lease, true)
		holds = append(holds, h)
	}
	return holds
}

// checkHeld checks that no hold was lost and that every key is still
// there, through the Ring, with more than a quarter of a lease left.
func checkHeld(t *testing.T, ring *redis.Ring, w *watchdog.Watchdog, holds []*watchdog.Hold, lease time.Duration, failures *roundFailures) {
	ctx := context.Background()
	lost := 0
	why := map[string]int{}
	for _, h := range holds {
		if err := w.Err(h); err != nil {
			lost++
			why[err.Error()]++
			continue
		}
		pttl, err := ring.PTTL(ctx, h.Key).Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, lease/4, "%s not renewed where the Ring routes it", h.Key)
	}
	assert.Zero(t, lost, "holds lost out of %d: %v; rounds that failed: %s", len(holds), why, failures)
}

// roundFailures notes the renewal rounds that failed (the watchdog's
// onRoundFailed), so that a test of lost holds says why they were lost.
type roundFailures struct {
	mu     sync.Mutex
	rounds int
	first  []string // the first few errors, each with when it came
	start  time.Time
}

func (r *roundFailures) note(holds int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.rounds++
	if len(r.first) < 5 {
		r.first = append(r.first, fmt.Sprintf("+%v %d holds: %v", time.Since(r.start).Round(time.Millisecond), holds, err))
	}
}

func (r *roundFailures) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d %q", r.rounds, r.first)
}

// TestRingRoundPerShard: on a Ring, a renewal round sends one script call
// per shard (not one per lock), every call to the shard that holds its
// keys, and the locks stay held.
func TestRingRoundPerShard(t *testing.T) {
	redistest.Parallel(t)
	servers(t, 2, func(t *testing.T, addrs []string, mini bool) {
		lease := ringLease(mini)
		n := 200
		if mini {
			n = miniLocks
		}
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addrs[0], "b": addrs[1]}})
		t.Cleanup(func() { _ = ring.Close() })
		counter := &redistest.Counter{}
		redistest.AddHook(ring, counter)
		failures := &roundFailures{}
		w := watchdog.New(ring, lease, nil, failures.note)
		t.Cleanup(w.Close)
		holds := watchRing(t, ring, w, n, lease)

		// Past the first rounds (which load the script on each shard).
		counter.Reset()
		require.Eventually(t, func() bool { return counter.RoundTrips() >= 2 }, 3*lease, time.Millisecond)
		counter.Reset()
		time.Sleep(2 * lease)
		rounds, calls := counter.RoundTrips(), counter.Commands()
		t.Logf("%d locks on 2 shards: %d rounds, %d script calls", n, rounds, calls)
		require.Positive(t, rounds, "no renewal round")
		assert.LessOrEqual(t, calls, 2*rounds, "script calls per round on a two-shard Ring")
		checkHeld(t, ring, w, holds, lease, failures)
	})
}

// TestRingShardDown: with one shard of three down, the Ring reroutes that
// shard's keys to both others; a renewal call that grouped them by their
// computed shard would renew some on the wrong one (and lose those holds).
// The watchdog routes every key where the Ring does, and the locks stay
// held.
func TestRingShardDown(t *testing.T) {
	redistest.Parallel(t)
	servers(t, 2, func(t *testing.T, addrs []string, mini bool) {
		lease := ringLease(mini)
		n := 100
		if mini {
			n = miniLocks
		}
		ring := redis.NewRing(&redis.RingOptions{
			Addrs:              map[string]string{"a": addrs[0], "b": closedAddr(t), "c": addrs[1]},
			HeartbeatFrequency: 10 * time.Millisecond,
		})
		t.Cleanup(func() { _ = ring.Close() })
		require.Eventually(t, func() bool { return ring.Len() == 2 }, 5*time.Second, 10*time.Millisecond,
			"the Ring never marked shard b down")
		failures := &roundFailures{}
		w := watchdog.New(ring, lease, nil, failures.note)
		t.Cleanup(w.Close)
		holds := watchRing(t, ring, w, n, lease)
		time.Sleep(lease + lease/2) // past the lease they were set with
		checkHeld(t, ring, w, holds, lease, failures)
	})
}

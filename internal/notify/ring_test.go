package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
)

// twoShards runs f on the addresses of a two-shard Ring: two miniredis
// servers, and two real redis-servers (the package's and one of the
// test's own), side by side in a test marked redistest.Parallel.
func twoShards(t *testing.T, f func(t *testing.T, addrs map[string]string)) {
	redistest.Subtest(t, "miniredis", func(t *testing.T) {
		a, b := miniredis.RunT(t), miniredis.RunT(t)
		a.ClockTTL(true)
		b.ClockTTL(true)
		f(t, map[string]string{"a": a.Addr(), "b": b.Addr()})
	})
	redistest.Subtest(t, "redis", func(t *testing.T) {
		a, b := redistest.Real(t), redistest.StartServer(t)
		f(t, map[string]string{"a": a.Addr, "b": b.Addr})
	})
}

func newRing(t testing.TB, opt *redis.RingOptions) *redis.Ring {
	ring := redis.NewRing(opt)
	t.Cleanup(func() { _ = ring.Close() })
	return ring
}

func direct(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func numSub(t testing.TB, c *redis.Client, ch string) int64 {
	n, err := c.PubSubNumSub(context.Background(), ch).Result()
	require.NoError(t, err)
	return n[ch]
}

// TestRingShards subscribes channels of both shards of a Ring through one
// hub: each is subscribed on the shard the Ring routes it to (where its
// lock's scripts publish), a publish there wakes its waiter, and Close
// closes every connection and stops every receiver.
func TestRingShards(t *testing.T) {
	twoShards(t, func(t *testing.T, addrs map[string]string) {
		redistest.CheckGoroutines(t)
		ctx := context.Background()
		ring := newRing(t, &redis.RingOptions{Addrs: addrs})
		h := notify.New(ring)
		servers := map[string]*redis.Client{"a": direct(t, addrs["a"]), "b": direct(t, addrs["b"])}

		base := redistest.Name(t)
		byShard := map[string][]string{}
		for i := 0; len(byShard["a"]) < 3 || len(byShard["b"]) < 3; i++ {
			ch := fmt.Sprintf("relock:test:{%s.%d}", base, i)
			shard := h.Shard(ch)
			require.Contains(t, addrs, shard, "channel %q routed to an unknown shard", ch)
			if len(byShard[shard]) < 3 {
				byShard[shard] = append(byShard[shard], ch)
			}
		}
		subs := map[string]*notify.Sub{}
		for shard, chans := range byShard {
			for _, ch := range chans {
				// The Ring routes a key with the channel's tag to the
				// computed shard.
				require.NoError(t, ring.Set(ctx, ch+":k", "1", time.Minute).Err())
				n, err := servers[shard].Exists(ctx, ch+":k").Result()
				require.NoError(t, err)
				require.Equal(t, int64(1), n, "the Ring stores %q's keys on another shard than %q", ch, shard)

				s, err := h.Subscribe(ctx, ch, "")
				require.NoError(t, err)
				subs[ch] = s
			}
		}
		assert.Equal(t, 6, h.Channels())
		for shard, chans := range byShard {
			for _, ch := range chans {
				assert.Equal(t, int64(1), numSub(t, servers[shard], ch), "%q not subscribed on its shard %q", ch, shard)
				for other, c := range servers {
					if other != shard {
						assert.Zero(t, numSub(t, c, ch), "%q subscribed on shard %q too", ch, other)
					}
				}
				// Published where a release publishes: on the shard.
				require.NoError(t, servers[shard].Publish(ctx, ch, notify.WakeOne).Err())
				assert.True(t, woken(subs[ch]), "wake-up on shard %q not delivered", shard)
			}
		}

		done := make(chan error, 1)
		go func() { done <- h.Close() }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not return")
		}
		for shard, chans := range byShard {
			for _, ch := range chans {
				assert.Eventually(t, func() bool { // no t here: it may outlive t
					n, err := servers[shard].PubSubNumSub(context.Background(), ch).Result()
					return err == nil && n[ch] == 0
				},
					2*time.Second, 10*time.Millisecond, "%q still subscribed after Close", ch)
			}
		}
	})
}

// TestRingWait: on a Ring, a waiter is woken by the release's push on its
// lock's own shard, whichever shard that is, within milliseconds of the
// Unlock (not by its timer, a second later).
func TestRingWait(t *testing.T) {
	redistest.Parallel(t)
	twoShards(t, func(t *testing.T, addrs map[string]string) {
		ctx := context.Background()
		holderRing := newRing(t, &redis.RingOptions{Addrs: addrs})
		waiterRing := newRing(t, &redis.RingOptions{Addrs: addrs})
		holder, waiter := relock.New(holderRing), relock.New(waiterRing)
		t.Cleanup(func() { _ = holder.Close() })
		t.Cleanup(func() { _ = waiter.Close() })
		route := notify.New(holderRing) // only computes shards: opens nothing
		servers := map[string]*redis.Client{"a": direct(t, addrs["a"]), "b": direct(t, addrs["b"])}

		base := redistest.Name(t)
		byShard := map[string][]string{}
		for i := 0; len(byShard["a"]) < 2 || len(byShard["b"]) < 2; i++ {
			name := fmt.Sprintf("%s.%d", base, i)
			shard := route.Shard("relock:mutex:{" + name + "}")
			if len(byShard[shard]) < 2 {
				byShard[shard] = append(byShard[shard], name)
			}
		}
		const rounds = 4
		for shard, names := range byShard {
			var worst time.Duration
			for _, name := range names {
				key := "relock:mutex:{" + name + "}"
				numsub := func() int64 { return numSub(t, servers[shard], key) }
				hm, wm := mutex.New(holder, name), mutex.New(waiter, name)
				for r := 0; r < rounds; r++ {
					require.NoError(t, hm.Lock(ctx))
					n, err := servers[shard].Exists(ctx, key).Result()
					require.NoError(t, err)
					require.Equal(t, int64(1), n, "lock %q is not on its computed shard %q", name, shard)
					require.Eventually(t, func() bool { return numsub() == 0 }, 2*time.Second, time.Millisecond,
						"previous waiter still subscribed")

					type result struct {
						at  time.Time
						err error
					}
					got := make(chan result, 1)
					go func() {
						lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						defer cancel()
						err := wm.Lock(lctx)
						got <- result{time.Now(), err}
					}()
					require.Eventually(t, func() bool { return numsub() == 1 }, 2*time.Second, time.Millisecond,
						"waiter not subscribed on its lock's shard %q", shard)
					unlocked := time.Now()
					require.NoError(t, hm.Unlock(ctx))
					res := <-got
					require.NoError(t, res.err)
					latency := res.at.Sub(unlocked)
					worst = max(worst, latency)
					// A waiter on its timer would wait about core.MaxWait (1 s).
					assert.Less(t, latency, 500*time.Millisecond,
						"shard %q round %d: waiter took the lock %v after Unlock (its timer, not a push)", shard, r, latency)
					require.NoError(t, wm.Unlock(ctx))
				}
			}
			t.Logf("shard %s: %d hand-offs, slowest %v", shard, rounds*len(names), worst)
		}
	})
}

// contended is a go-redis hook that answers every acquire of a mutex as
// if another owner held it for 200 ms more, without sending anything: a
// waiter's attempts work while no shard of its Ring is up.
type contended struct{}

func (contended) DialHook(next redis.DialHook) redis.DialHook { return next }

func (contended) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.BoolCmd: // SET NX PX, the first attempt
			c.SetVal(false)
			return nil
		case *redis.Cmd: // the acquire script: {0, holder's pttl}
			c.SetVal([]any{int64(0), int64(200)})
			return nil
		}
		return next(ctx, cmd)
	}
}

func (contended) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// refusing is a Redis client whose Subscribe panics as go-redis's Ring's
// does (it delegates to a closed Ring's).
type refusing struct {
	redis.UniversalClient
	dead *redis.Ring
}

func (r refusing) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return r.dead.Subscribe(ctx, channels...)
}

func deadRing(t testing.TB) *redis.Ring {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": closedAddr(t)}})
	require.NoError(t, ring.Close())
	require.Panics(t, func() { ring.Subscribe(context.Background(), "x") }, "a closed Ring's Subscribe no longer panics")
	return ring
}

// closedAddr returns a loopback address that refuses connections (a
// port merely free was taken by a server of a test beside it, and the
// "down" shard was up).
func closedAddr(t testing.TB) string { return redistest.ClosedAddr(t) }

// TestRingSubscribeFails: where go-redis's Ring.Subscribe panics (every
// shard down, or a Subscribe that panics outright), a blocking Lock neither
// panics nor fails at once: it waits on its timer until its ctx ends, and
// Close returns promptly afterwards.
func TestRingSubscribeFails(t *testing.T) {
	lockUntilDeadline := func(t *testing.T, c *relock.Client, name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := mutex.New(c, name).Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotObtained, "the waiter did not wait on its timer without a subscription")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the wait did not last until the deadline")
		assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "gave up before the deadline")

		done := make(chan error, 1)
		go func() { done <- c.Close() }()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("Client.Close did not return within a second")
		}
	}

	t.Run("shards down", func(t *testing.T) {
		redistest.CheckGoroutines(t)
		ring := newRing(t, &redis.RingOptions{
			Addrs:              map[string]string{"a": closedAddr(t), "b": closedAddr(t)},
			HeartbeatFrequency: 10 * time.Millisecond,
		})
		require.Eventually(t, func() bool { return ring.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
			"the Ring never marked its unreachable shards down")
		require.Panics(t, func() { ring.Subscribe(context.Background(), "x") }, "Ring.Subscribe no longer panics")
		redistest.AddHook(ring, contended{})
		lockUntilDeadline(t, relock.New(ring), redistest.Name(t))
	})

	t.Run("subscribe panics", func(t *testing.T) {
		redistest.CheckGoroutines(t)
		m := miniredis.RunT(t)
		rdb := direct(t, m.Addr())
		name := redistest.Name(t)
		holder := relock.New(rdb)
		t.Cleanup(func() { _ = holder.Close() })
		require.NoError(t, mutex.New(holder, name).Lock(context.Background()))
		lockUntilDeadline(t, relock.New(refusing{rdb, deadRing(t)}), name)
	})
}

// TestRingShardDownErrors: with a shard down, Subscribe fails for channels
// without a connection (the waiter relies on its timer), and its error
// names the shard, never the channel (which may carry an owner token).
func TestRingShardDownErrors(t *testing.T) {
	redistest.CheckGoroutines(t)
	ctx := context.Background()
	m := miniredis.RunT(t)
	ring := newRing(t, &redis.RingOptions{
		Addrs:              map[string]string{"a": m.Addr(), "b": closedAddr(t)},
		HeartbeatFrequency: 10 * time.Millisecond,
	})
	require.Eventually(t, func() bool { return ring.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the Ring never marked shard b down")
	h := notify.New(ring)
	t.Cleanup(func() { _ = h.Close() })
	base := redistest.Name(t)
	for _, shard := range []string{"a", "b"} {
		ch := channelsOf(h, base+".owner-token", shard, 1)[0]
		s, err := h.Subscribe(ctx, ch, "")
		require.Error(t, err, "shard %s", shard)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), fmt.Sprintf("ring shard %q", shard))
		assert.NotContains(t, err.Error(), "owner-token", "the error names the channel")
	}
	assert.Zero(t, h.Channels())
}

// TestRingSetAddrs: after Ring.SetAddrs removes a shard, connections
// already open keep serving their shard's channels and no new one opens;
// after SetAddrs adds a shard, the routing may differ for any channel and
// Subscribe fails for every one.
func TestRingSetAddrs(t *testing.T) {
	twoShards(t, func(t *testing.T, addrs map[string]string) {
		redistest.CheckGoroutines(t)
		ctx := context.Background()
		ring := newRing(t, &redis.RingOptions{Addrs: addrs})
		h := notify.New(ring)
		t.Cleanup(func() { _ = h.Close() })
		a := direct(t, addrs["a"])
		base := redistest.Name(t)
		xs := channelsOf(h, base, "a", 2)
		y := channelsOf(h, base, "b", 1)[0]

		sx, err := h.Subscribe(ctx, xs[0], "")
		require.NoError(t, err)
		t.Cleanup(sx.Close)

		ring.SetAddrs(map[string]string{"a": addrs["a"]})
		sx2, err := h.Subscribe(ctx, xs[1], "")
		require.NoError(t, err, "a channel of shard a, whose connection is open")
		t.Cleanup(sx2.Close)
		require.NoError(t, a.Publish(ctx, xs[1], notify.WakeOne).Err())
		assert.True(t, woken(sx2))
		_, err = h.Subscribe(ctx, y, "")
		assert.Error(t, err, "a connection opened with shard b removed")

		c := miniredis.RunT(t)
		ring.SetAddrs(map[string]string{"a": addrs["a"], "b": addrs["b"], "c": c.Addr()})
		_, err = h.Subscribe(ctx, channelsOf(h, base+".2", "a", 1)[0], "")
		assert.Error(t, err, "subscribed after a shard was added")
		assert.Equal(t, 2, h.Channels())
	})
}

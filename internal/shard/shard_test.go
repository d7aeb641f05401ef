package shard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/shard"
)

// Routing is computed by the client, so miniredis servers show it as well
// as real ones.

func newRing(t *testing.T, opt *redis.RingOptions) *redis.Ring {
	ring := redis.NewRing(opt)
	t.Cleanup(func() { _ = ring.Close() })
	return ring
}

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string { return redistest.ClosedAddr(t) }

func TestTag(t *testing.T) {
	for key, want := range map[string]string{
		"relock:mutex:{x}":   "x",
		"relock:fair:{x}:w:": "x",
		"{a}{b}":             "a",
		"{}x":                "{}x", // an empty tag: the whole key
		"x{":                 "x{",
		"x}{y":               "x}{y",
		"plain":              "plain",
		"{user1000}.b":       "user1000",
	} {
		assert.Equal(t, want, shard.Tag(key), key)
	}
}

// TestGet: Get names the shard where the Ring stores a key.
func TestGet(t *testing.T) {
	ctx := context.Background()
	servers := map[string]*miniredis.Miniredis{}
	addrs := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		servers[name] = miniredis.RunT(t)
		addrs[name] = servers[name].Addr()
	}
	ring := newRing(t, &redis.RingOptions{Addrs: addrs})
	r := shard.NewRing(ring)
	require.Equal(t, shard.Exact, r.State())
	seen := map[string]int{}
	for i := range 300 {
		key := fmt.Sprintf("relock:mutex:{lock.%d}", i)
		if i%3 == 0 {
			key = fmt.Sprintf("plain.%d", i)
		}
		require.NoError(t, ring.Set(ctx, key, "1", time.Minute).Err())
		name := r.Get(key)
		require.Contains(t, servers, name)
		assert.True(t, servers[name].Exists(key), "%s is not on shard %s", key, name)
		seen[name]++
	}
	assert.Len(t, seen, 3, "keys on every shard: %v", seen)
}

// TestState follows a Ring through SetAddrs and a shard outage.
func TestState(t *testing.T) {
	a, b, c := miniredis.RunT(t), miniredis.RunT(t), miniredis.RunT(t)
	ring := newRing(t, &redis.RingOptions{
		Addrs:              map[string]string{"a": a.Addr(), "b": b.Addr()},
		HeartbeatFrequency: 10 * time.Millisecond,
	})
	r := shard.NewRing(ring)
	assert.Equal(t, shard.Exact, r.State(), "every shard up")

	ring.SetAddrs(map[string]string{"a": a.Addr()})
	assert.Equal(t, shard.Degraded, r.State(), "shard b removed")

	ring.SetAddrs(map[string]string{"a": a.Addr(), "b": b.Addr()})
	assert.Equal(t, shard.Exact, r.State(), "shard b back")

	ring.SetAddrs(map[string]string{"a": a.Addr(), "b": b.Addr(), "c": c.Addr()})
	assert.Equal(t, shard.Changed, r.State(), "shard c added")

	ring.SetAddrs(map[string]string{"a": a.Addr(), "c": c.Addr()})
	assert.Eventually(t, func() bool { return r.State() == shard.Changed }, time.Second, time.Millisecond,
		"shard b replaced by c")

	ring.SetAddrs(map[string]string{"a": a.Addr(), "b": b.Addr()})
	assert.Eventually(t, func() bool { return r.State() == shard.Exact }, time.Second, time.Millisecond,
		"the options' shards back")

	// Shard b of the options goes down.
	ring = newRing(t, &redis.RingOptions{
		Addrs:              map[string]string{"a": a.Addr(), "b": closedAddr(t)},
		HeartbeatFrequency: 10 * time.Millisecond,
	})
	r = shard.NewRing(ring)
	assert.Eventually(t, func() bool { return r.State() == shard.Degraded }, 5*time.Second, 10*time.Millisecond,
		"shard b down")
}

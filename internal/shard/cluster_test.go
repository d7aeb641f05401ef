package shard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/shard"
)

// reply is an error reply of Redis, as go-redis returns it.
type reply = redistest.Reply

func TestUnsettled(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = single.Close() })
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{reply("ASK 3470 127.0.0.1:7001"), true},
		{reply("MOVED 3470 127.0.0.1:7001"), true},
		{fmt.Errorf("mutex: unlock: %w", reply("MOVED 3470 127.0.0.1:7001")), true},
		{reply("CLUSTERDOWN The cluster is down"), false}, // nobody serves the slot: not a move
		{reply("ERR unknown command"), false},
		{errors.New("MOVED 3470 127.0.0.1:7001"), false}, // not a reply
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		assert.Equal(t, tc.want, shard.Unsettled(cc, tc.err), "%v", tc.err)
		assert.Equal(t, tc.want, shard.Moving(tc.err), "%v", tc.err)
		assert.False(t, shard.Unsettled(single, tc.err), "a single node's client cannot follow %v", tc.err)
	}
}

func TestPause(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, shard.Pause(ctx, 1, start))
	require.NoError(t, shard.Pause(ctx, 2, start))
	assert.GreaterOrEqual(t, time.Since(start), 15*time.Millisecond, "at least half of 10 ms, then of 20 ms")

	long := time.Now().Add(-shard.MaxUnsettled)
	start = time.Now()
	assert.Error(t, shard.Pause(ctx, 1, long), "no more tries after MaxUnsettled")
	assert.Less(t, time.Since(start), 50*time.Millisecond, "the last refusal is returned at once")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, shard.Pause(cctx, 10, time.Now()), context.Canceled)
}

func TestUnreached(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = single.Close() })
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("mutex: unlock: %w", refused), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, false}, // sent: outcome unknown
		{reply("MOVED 3470 127.0.0.1:7001"), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		assert.Equal(t, tc.want, shard.Unreached(cc, tc.err), "%v", tc.err)
		assert.False(t, shard.Unreached(single, tc.err), "a single node's client: %v", tc.err)
	}
}

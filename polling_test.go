package relock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
)

// TestPolling: a Client made WithPolling never subscribes; its waiters
// poll at the interval and get the lock soon after it is released.
func TestPolling(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		holderC, _ := redistest.NewClient(t, s)
		c, _ := redistest.NewClient(t, s, relock.WithPolling(50*time.Millisecond))
		name := redistest.Name(t)
		holder, waiter := mutex.New(holderC, name), mutex.New(c, name)
		require.NoError(t, holder.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		time.Sleep(150 * time.Millisecond)
		if s.Real() {
			n, err := s.Client(t).PubSubNumSub(ctx, "relock:mutex:{"+name+"}").Result()
			require.NoError(t, err)
			assert.Zero(t, n["relock:mutex:{"+name+"}"], "a polling Client subscribed")
		}
		released := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		// Below the second a waiter's timer waits without polling (500 ms
		// was exceeded on a loaded machine: 643 ms).
		assert.Less(t, time.Since(released), 800*time.Millisecond, "a polling waiter took far longer than its interval")
		require.NoError(t, waiter.Unlock(ctx))
	})
}

func TestPollingBadInterval(t *testing.T) {
	redistest.Parallel(t)
	for _, d := range []time.Duration{0, -time.Second, time.Second + time.Millisecond, time.Hour} {
		c := relock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), relock.WithPolling(d))
		assert.ErrorIs(t, c.Err(), relock.ErrInvalidOption, "WithPolling(%v)", d)
		_ = c.Close()
	}
}

// TestNoChannelRights: a Redis user allowed relock's keys and commands but
// no channel: Lock neither fails nor hangs (waiters poll), and the Client
// says so once (EventPushUnavailable, logged).
func TestNoChannelRights(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		admin := s.Client(t)
		user := "nochannels-" + strings.ReplaceAll(redistest.Name(t), ".", "-")
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~relock:*", "resetchannels", "+@all").Err())
		t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
		var refused atomic.Int32
		rdb := s.Client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
		c := relock.New(rdb, relock.WithObserver(func(e relock.Event) {
			if e.Type == relock.EventPushUnavailable {
				refused.Add(1)
				assert.Contains(t, e.Err.Error(), "NOPERM")
			}
		}))
		t.Cleanup(func() { _ = c.Close() })
		holderC, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		holder := mutex.New(holderC, name)
		for i := 0; i < 3; i++ {
			require.NoError(t, holder.Lock(ctx))
			waiter := mutex.New(c, name)
			got := make(chan error, 1)
			go func() { got <- waiter.Lock(ctx) }()
			time.Sleep(100 * time.Millisecond)
			require.NoError(t, holder.Unlock(ctx))
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(3 * time.Second):
				t.Fatal("a waiter without channel rights hung")
			}
			require.NoError(t, waiter.Unlock(ctx))
		}
		assert.Equal(t, int32(1), refused.Load(), "EventPushUnavailable events")
	})
}

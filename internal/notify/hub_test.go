package notify_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func woken(s *notify.Sub) bool {
	select {
	case <-s.C:
		return true
	case <-time.After(300 * time.Millisecond):
		return false
	}
}

func TestSharedSubscription(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}"

		a, err := h.Subscribe(ctx, ch)
		require.NoError(t, err)
		b, err := h.Subscribe(ctx, ch)
		require.NoError(t, err)
		assert.Equal(t, 1, h.Channels())
		numsub := func() int64 {
			n, err := rdb.PubSubNumSub(ctx, ch).Result()
			require.NoError(t, err)
			return n[ch]
		}
		if s.Real() {
			assert.Equal(t, int64(1), numsub(), "one Redis subscription for two waiters")
		}

		// Wake one: exactly one of the two waiters, and the other next time.
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
		first, second := woken(a), woken(b)
		assert.True(t, first != second, "wake-one woke %v and %v", first, second)
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
		again1, again2 := woken(a), woken(b)
		assert.True(t, again1 != again2, "wake-one woke %v and %v", again1, again2)
		assert.Equal(t, first, again2, "wake-ups did not rotate between the waiters")

		// Wake all: both.
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeAll).Err())
		assert.True(t, woken(a))
		assert.True(t, woken(b))

		// A waiter that leaves with an unconsumed wake-up passes it on.
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
		time.Sleep(100 * time.Millisecond)
		var holder, other *notify.Sub = a, b
		if len(a.C) == 0 {
			holder, other = b, a
		}
		holder.Close()
		assert.True(t, woken(other), "the wake-up was lost with the leaving waiter")

		other.Close()
		assert.Equal(t, 0, h.Channels())
		if s.Real() {
			assert.Eventually(t, func() bool { return numsub() == 0 }, 2*time.Second, 10*time.Millisecond,
				"still subscribed after the last waiter left")
		}
	})
}

func TestResubscribeAfterLastLeft(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}"
		for i := 0; i < 20; i++ {
			sub, err := h.Subscribe(ctx, ch)
			require.NoError(t, err)
			require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
			require.True(t, woken(sub), "round %d: wake-up after resubscribing not delivered", i)
			sub.Close()
		}
	})
}

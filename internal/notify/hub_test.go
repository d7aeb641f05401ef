package notify_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}"

		a, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		b, err := h.Subscribe(ctx, ch, "")
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
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}"
		for i := 0; i < 20; i++ {
			sub, err := h.Subscribe(ctx, ch, "")
			require.NoError(t, err)
			require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
			require.True(t, woken(sub), "round %d: wake-up after resubscribing not delivered", i)
			sub.Close()
		}
	})
}

// gated is a Redis client whose Subscribe, while refusing, waits for gate
// and then panics as go-redis's Ring's does with no shard up.
type gated struct {
	redis.UniversalClient
	refuse  *atomic.Bool
	entered chan struct{}
	gate    chan struct{}
	dead    *redis.Ring
}

func (g gated) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	if !g.refuse.Load() {
		return g.UniversalClient.Subscribe(ctx, channels...)
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return g.dead.Subscribe(ctx, channels...)
}

// TestSubscribeRefused: a connection that go-redis refuses to open (with a
// panic) makes Subscribe fail, for the waiter that opened it and for one
// queued behind it, without a panic, a hang or a leak. A waiter that shared
// the channel keeps a Sub without a connection, and the next connection
// subscribes its channel again.
func TestSubscribeRefused(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := context.Background()
		rdb := s.Client(t)
		g := gated{UniversalClient: rdb, refuse: &atomic.Bool{}, entered: make(chan struct{}, 1),
			gate: make(chan struct{}), dead: deadRing(t)}
		g.refuse.Store(true)
		h := notify.New(g)
		t.Cleanup(func() { _ = h.Close() })
		base := "relock:test:{" + redistest.Name(t) + "}"
		x, y, z := base+".x", base+".y", base+".z"

		type result struct {
			sub *notify.Sub
			err error
		}
		subscribe := func(ch string) chan result {
			out := make(chan result, 1)
			go func() {
				sub, err := h.Subscribe(ctx, ch, "")
				out <- result{sub, err}
			}()
			return out
		}
		opener := subscribe(x)
		<-g.entered                       // opening the connection
		sharer := subscribe(x)            // shares x: waits for its confirmation
		queued := subscribe(y)            // a new channel: waits to send on the connection
		time.Sleep(50 * time.Millisecond) // let both register (if late, they fail too)
		close(g.gate)

		for what, c := range map[string]chan result{"opener": opener, "queued": queued} {
			select {
			case r := <-c:
				require.Error(t, r.err, what)
				assert.Nil(t, r.sub, what)
				assert.NotContains(t, r.err.Error(), base, "%s: the error names a channel", what)
			case <-time.After(2 * time.Second):
				t.Fatalf("%s: Subscribe hung on a refused connection", what)
			}
		}
		var orphan *notify.Sub
		select {
		case r := <-sharer:
			orphan = r.sub
		case <-time.After(2 * time.Second):
			t.Fatal("sharer: Subscribe hung on a refused connection")
		}
		if orphan == nil {
			t.Log("the sharer registered late and failed like the opener")
			assert.Equal(t, 0, h.Channels())
		} else {
			assert.Equal(t, 1, h.Channels())
		}

		// Accepted again: the next connection carries the orphaned channel too.
		g.refuse.Store(false)
		sz, err := h.Subscribe(ctx, z, "")
		require.NoError(t, err)
		require.NoError(t, rdb.Publish(ctx, z, notify.WakeOne).Err())
		assert.True(t, woken(sz))
		sz.Close()
		if orphan != nil {
			require.NoError(t, rdb.Publish(ctx, x, notify.WakeOne).Err())
			assert.True(t, woken(orphan), "the orphaned channel was not subscribed again")
			orphan.Close()
			orphan.Close() // twice: does nothing
		}
		assert.Equal(t, 0, h.Channels())

		done := make(chan error, 1)
		go func() { done <- h.Close() }()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(time.Second):
			t.Fatal("Close did not return")
		}
	})
}

// TestGrant: a grant reaches only the Sub subscribed with its address,
// whatever the order of the waiters, and a grant for an address nobody
// here has wakes nobody.
func TestGrant(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}:w:"

		plain, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		w1, err := h.Subscribe(ctx, ch, "w1")
		require.NoError(t, err)
		w2, err := h.Subscribe(ctx, ch, "w2")
		require.NoError(t, err)
		t.Cleanup(plain.Close)
		t.Cleanup(w1.Close)
		t.Cleanup(w2.Close)

		for _, to := range []*notify.Sub{w2, w1, w2} {
			addr, other := "w2", w1
			if to == w1 {
				addr, other = "w1", w2
			}
			require.NoError(t, rdb.Publish(ctx, ch, notify.GrantPrefix+addr+"|data-"+addr).Err())
			require.True(t, woken(to), "grant to %s not delivered", addr)
			g, ok := to.Grant()
			assert.True(t, ok)
			assert.Equal(t, "data-"+addr, g)
			_, ok = to.Grant()
			assert.False(t, ok, "a grant taken twice")
			assert.Empty(t, plain.C, "a grant woke a waiter without an address")
			assert.Empty(t, other.C, "a grant to %s woke another waiter", addr)
			_, ok = other.Grant()
			assert.False(t, ok, "a grant to %s reached another waiter", addr)
		}

		require.NoError(t, rdb.Publish(ctx, ch, notify.GrantPrefix+"gone|data").Err())
		for _, s := range []*notify.Sub{plain, w1, w2} {
			assert.False(t, woken(s), "a grant for nobody here woke a waiter")
		}
		// Wake-ups still go to any waiter.
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeAll).Err())
		for _, s := range []*notify.Sub{plain, w1, w2} {
			assert.True(t, woken(s))
			_, ok := s.Grant()
			assert.False(t, ok, "a wake-up read as a grant")
		}
	})
}

// TestReconnect: when the pub/sub connection breaks, its waiters are woken
// (a wake-up may have been lost), go-redis reconnects and resubscribes, and
// wake-ups are delivered again.
func TestReconnect(t *testing.T) {
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := context.Background()
		rdb := s.Client(t)
		h := notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		ch := "relock:test:{" + redistest.Name(t) + "}"
		sub, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		t.Cleanup(sub.Close)

		require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
		assert.True(t, woken(sub), "waiter not woken when its connection broke")
		require.Eventually(t, func() bool {
			n, err := rdb.PubSubNumSub(ctx, ch).Result()
			return err == nil && n[ch] == 1
		}, 3*time.Second, 10*time.Millisecond, "not subscribed again")
		time.Sleep(50 * time.Millisecond)
		for len(sub.C) > 0 {
			<-sub.C // the wake-up of the reconnection
		}
		require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
		assert.True(t, woken(sub), "wake-up after the reconnection not delivered")
	})
}

// noAddr is the address of a waiter that takes no grants.
func noAddr() string { return "" }

// TestLinger: a channel stays subscribed for the linger after its last
// waiter left; a waiter that comes meanwhile shares that subscription (no
// SUBSCRIBE is sent, and a wake-up reaches it), and once nobody came for
// the linger the channel is unsubscribed, and the next waiter subscribes
// it anew. Join joins the channel while a waiter has it or it lingers,
// and not before nor after. It counts its server's SUBSCRIBEs: the server
// is its own.
func TestLinger(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb, admin := s.Client(t), s.Admin(t)
		ch := "relock:test:{" + redistest.Name(t) + "}"
		numsub := func() int64 {
			n, err := admin.PubSubNumSub(ctx, ch).Result()
			require.NoError(t, err)
			return n[ch]
		}
		subscribes := func() int64 { return redistest.CommandCalls(t, admin, "subscribe") }
		wakes := func(sub *notify.Sub) {
			t.Helper()
			require.NoError(t, rdb.Publish(ctx, ch, notify.WakeOne).Err())
			assert.True(t, woken(sub), "a wake-up did not reach the waiter")
		}

		// A linger far longer than the test: the channel stays.
		h := notify.New(rdb)
		notify.SetLinger(h, time.Hour)
		assert.Nil(t, h.Join(ch, noAddr), "joined before any Subscribe")
		a, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		joined := h.Join(ch, noAddr)
		if assert.NotNil(t, joined, "not joined with a waiter subscribed") {
			joined.Close()
		}
		a.Close()
		assert.Equal(t, 0, h.Channels(), "a lingering channel counted as one with waiters")
		assert.Equal(t, int64(1), numsub(), "unsubscribed with the linger not over")
		before := subscribes()
		b, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		assert.Equal(t, before, subscribes(), "a SUBSCRIBE for a channel that lingered")
		wakes(b)
		b.Close()
		// Join takes a lingering channel as it is, and a wake-up reaches it.
		j := h.Join(ch, noAddr)
		require.NotNil(t, j, "a lingering channel not joined")
		assert.Equal(t, before, subscribes(), "a SUBSCRIBE for a channel joined")
		wakes(j)
		j.Close()
		require.NoError(t, h.Close())
		assert.Nil(t, h.Join(ch, noAddr), "joined after the hub's Close")
		assert.Eventually(t, func() bool { return numsub() == 0 }, 2*time.Second, 10*time.Millisecond,
			"a lingering channel outlived the hub's Close")

		// A short linger: unsubscribed once it is over, subscribed anew
		// by the next waiter.
		h = notify.New(rdb)
		t.Cleanup(func() { _ = h.Close() })
		notify.SetLinger(h, 50*time.Millisecond)
		c, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		c.Close()
		assert.Eventually(t, func() bool { return numsub() == 0 }, 2*time.Second, 10*time.Millisecond,
			"still subscribed after the linger")
		assert.Nil(t, h.Join(ch, noAddr), "joined after the linger's UNSUBSCRIBE")
		before = subscribes()
		d, err := h.Subscribe(ctx, ch, "")
		require.NoError(t, err)
		assert.Equal(t, before+1, subscribes(), "no SUBSCRIBE after the linger")
		wakes(d)
		d.Close()
	})
}

package locktest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
)

// A waiter of these tests waits this long before the release, so it is
// queued (and, for a lock that hands over only to starving waiters, past
// the starvation threshold).
const queued = 150 * time.Millisecond

// singles counts the commands a client sends one by one, but the
// watchdog's renewals and claims (see renewal: in a pipeline on a single
// server, one by one on a Cluster) and the set-up of a new connection.
type singles struct {
	n     atomic.Int64
	first atomic.Int64 // when the first command counted since it was 0 was sent (Unix ns)
}

func (c *singles) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (c *singles) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !renewal(cmd) && !redistest.Handshake(cmd) {
			c.first.CompareAndSwap(0, time.Now().UnixNano())
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *singles) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// lockAsync starts h.Lock(ctx) and returns its outcome's channel.
func lockAsync(ctx context.Context, h Handle) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- h.Lock(ctx) }()
	return ch
}

func await(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
		return nil
	}
}

// waitFullLease checks that q's lock reaches more than claim of lease
// left: the new owner's watchdog has claimed the grant.
func waitFullLease(t *testing.T, q Queries, claim time.Duration) {
	t.Helper()
	assert.Eventually(t, func() bool {
		d, err := q.RemainingLease(context.Background())
		return err == nil && d > claim
	}, 2*time.Second, 5*time.Millisecond, "the grant was never claimed (lease still the claim lease)")
}

// HandOff checks the direct hand-off: a release makes the waiting handle
// the owner and pushes it the grant, and the waiter's Lock returns
// without another command on its client; its watchdog then claims the
// full lease.
func HandOff(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	// The waiter's claim lease is half its heartbeat, claimed after a
	// quarter of that: 500 ms (the default heartbeat's took 625 ms a
	// round; with 1 s and then 2 s, the claim lease of 500 ms and then of
	// 1 s lapsed before its claim on a loaded machine).
	const hb = 4 * time.Second
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		wrdb := s.Client(t)
		admin := s.Admin(t) // reads tokens with commands relock does not send
		cmds := &singles{}
		redistest.AddHook(wrdb, cmds)
		wc := relock.New(wrdb)
		t.Cleanup(func() { _ = wc.Close() })
		name := redistest.Name(t)
		holder, waiter := k.New(c, name), k.waiter(wc, name, relock.WithHeartbeat(hb))
		// A waiter's timer (about a second) may fire inside a hand-off on
		// a loaded machine; one such hand-off of five is tolerated.
		const rounds = 5
		pushed := 0
		for i := 0; i < rounds; i++ {
			require.NoError(t, holder.Lock(ctx))
			got := lockAsync(ctx, waiter)
			time.Sleep(queued)
			before := cmds.n.Load()
			require.NoError(t, holder.Unlock(ctx))
			require.NoError(t, await(t, got, 2*time.Second, "the waiter's Lock"))
			if cmds.n.Load() == before {
				pushed++
			}
			assert.True(t, waiter.Held())
			assert.Equal(t, k.Tokens(ctx, admin, name)[:1], k.Tokens(ctx, admin, name), "more than one owner")
			waitFullLease(t, holder.(Queries), hb/2)
			require.NoError(t, waiter.Unlock(ctx))
		}
		assert.GreaterOrEqual(t, pushed, rounds-1, "hand-offs in which the waiter sent no command between the release and its Lock returning")
	})
}

// GrantLost checks that a grant whose push is lost is not lost: the
// waiter finds at its next timed attempt that it holds the lock.
func GrantLost(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		wc, proxy := proxied(t, s)
		name := redistest.Name(t)
		holder, waiter := k.New(c, name), k.waiter(wc, name)
		require.NoError(t, holder.Lock(ctx))
		got := lockAsync(ctx, waiter)
		time.Sleep(queued)
		proxy.Drop([]byte("g|"))
		released := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, await(t, got, 3*time.Second, "the Lock of a waiter whose grant was lost"))
		t.Logf("a lost grant was found %v after the release", time.Since(released))
		assert.True(t, waiter.Held())
		proxy.Drop(nil)
		waitFullLease(t, holder.(Queries), core.DefaultHeartbeat/2)
		require.NoError(t, waiter.Unlock(ctx))
	})
}

// GrantToDeadWaiter checks that a grant to a waiter that died (its
// network cut right after it queued) delays the next waiter by at most
// the dead one's claim lease plus one timed attempt.
func GrantToDeadWaiter(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const hb = time.Second // the dead waiter's claim lease: 500 ms
		c, _ := redistest.NewClient(t, s)
		// Once it gives up, the dead waiter's Lock returns when the read
		// of its last command times out (3 s by default).
		dc, proxy := proxied(t, s, func(o *redis.Options) { o.ReadTimeout = time.Second })
		name := redistest.Name(t)
		holder, next := k.New(c, name), k.waiter(c, name)
		dead := k.waiter(dc, name, relock.WithHeartbeat(hb))
		require.NoError(t, holder.Lock(ctx))
		dctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		deadGot := lockAsync(dctx, dead)
		time.Sleep(queued)
		nextGot := lockAsync(ctx, next)
		time.Sleep(queued)
		proxy.Blackhole(true) // dead: it neither hears nor answers
		released := time.Now()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, await(t, nextGot, 5*time.Second, "the next waiter's Lock"))
		waited := time.Since(released)
		t.Logf("the next waiter got the lock %v after the release", waited)
		assert.Less(t, waited, hb/2+1500*time.Millisecond, "a dead waiter held the lock up for longer than its claim lease and a timed attempt")
		require.NoError(t, next.Unlock(ctx))
		cancel()
		proxy.Blackhole(false)
		assert.Error(t, await(t, deadGot, 10*time.Second, "the dead waiter's Lock"))
		assert.False(t, dead.Held())
	})
}

// GrantThenGiveUp checks a waiter that gives up (its ctx ends, or its
// Client closes) while the lock is granted to it and before it knows:
// it passes the lock on, and the next waiter has it at once.
func GrantThenGiveUp(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	for _, how := range []string{"ctx", "close"} {
		redistest.Subtest(t, how, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, s *redistest.Server) {
				ctx := testCtx(t)
				c, _ := redistest.NewClient(t, s)
				wc, proxy := proxied(t, s)
				name := redistest.Name(t)
				holder, w, next := k.New(c, name), k.waiter(wc, name), k.waiter(c, name)
				require.NoError(t, holder.Lock(ctx))
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				wGot := lockAsync(wctx, w)
				time.Sleep(queued)
				nextGot := lockAsync(ctx, next)
				time.Sleep(queued)
				proxy.Drop([]byte("g|")) // w will not hear of its grant
				require.NoError(t, holder.Unlock(ctx))
				time.Sleep(20 * time.Millisecond)
				gaveUp := time.Now()
				if how == "ctx" {
					cancel()
				} else {
					require.NoError(t, wc.Close())
				}
				err := await(t, wGot, 3*time.Second, "the Lock that gave up")
				if err == nil {
					t.Skip("the waiter's timed attempt found its grant before it gave up")
				}
				assert.ErrorIs(t, err, relock.ErrNotObtained)
				require.NoError(t, await(t, nextGot, 3*time.Second, "the next waiter's Lock"))
				assert.Less(t, time.Since(gaveUp), 500*time.Millisecond, "the grant was not passed on when its waiter gave up")
				assert.False(t, w.Held())
				require.NoError(t, next.Unlock(ctx))
			})
		})
	}
}

// proxied returns a Client whose connections go through a proxy to s;
// opts may adjust its go-redis options.
func proxied(t *testing.T, s *redistest.Server, opts ...func(*redis.Options)) (*relock.Client, *redistest.Proxy) {
	t.Helper()
	s.SingleOnly(t, "a proxy in front of one address")
	p := redistest.NewProxy(t, s.Addr)
	o := &redis.Options{Addr: p.Addr}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	return c, p
}

// waitQueued waits until n waiters are in the queue of k's lock name.
func waitQueued(t *testing.T, rdb redis.UniversalClient, k Kind, name string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return rdb.ZCard(context.Background(), k.Key(name)+":queue").Val() == n },
		3*time.Second, 2*time.Millisecond, "the queue never held %d waiters", n)
}

// notBothHeld fails t if the call behind got returns (holding) within d.
func notBothHeld(t *testing.T, got <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s returned %v while another owner holds the lock", what, err)
	case <-time.After(d):
	}
}

// GrantToOtherCall: two goroutines wait on one handle (calls A and B); a
// release grants the lock to A, whose push is late; B gives up meanwhile,
// and its leaving must not hand A's grant on while A can still take it by
// the push: A and the next waiter W2 must never both hold.
func GrantToOtherCall(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		c0, rdb := redistest.NewClient(t, s)
		c1, proxy := proxied(t, s)
		x, w2, h := k.New(c0, name), k.waiter(c0, name), k.waiter(c1, name)
		require.NoError(t, x.Lock(ctx))
		a := lockAsync(ctx, h)
		waitQueued(t, rdb, k, name, 1)
		bctx, cancelB := context.WithCancel(ctx)
		b := lockAsync(bctx, h)
		waitQueued(t, rdb, k, name, 2)
		w := lockAsync(ctx, w2)
		waitQueued(t, rdb, k, name, 3)
		time.Sleep(50 * time.Millisecond) // all past the starvation threshold

		release := proxy.HoldBack([]byte("g|"))
		t.Cleanup(release)
		require.NoError(t, x.Unlock(ctx)) // granted to A, its push held back
		cancelB()
		assert.Error(t, await(t, b, 3*time.Second, "B's Lock"))
		select {
		case err := <-w:
			// A's grant was passed on: A must not take the late push.
			require.NoError(t, err)
			release()
			notBothHeld(t, a, 500*time.Millisecond, "A's Lock")
			require.NoError(t, w2.Unlock(ctx))
			require.NoError(t, await(t, a, 3*time.Second, "A's Lock after W2"))
		case err := <-a:
			// A took its grant (by an attempt): W2 must wait.
			require.NoError(t, err)
			release()
			notBothHeld(t, w, 500*time.Millisecond, "W2's Lock")
			require.NoError(t, h.Unlock(ctx))
			require.NoError(t, await(t, w, 3*time.Second, "W2's Lock after A"))
		case <-time.After(5 * time.Second):
			release()
			t.Fatal("nobody got the lock")
		}
	})
}

// StaleGrant: a grant whose push is late lapses (the waiter's claim lease
// is its 200 ms fixed lease) and another waiter Y takes the lock; the
// first waiter's next attempt is refused and queues it again. The old push
// arriving then must not be taken: both would hold.
func StaleGrant(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are woken, not granted")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		c0, rdb := redistest.NewClient(t, s)
		c1, proxy := proxied(t, s)
		x, y := k.New(c0, name), k.waiter(c0, name)
		h := k.waiter(c1, name, relock.WithLease(200*time.Millisecond))
		require.NoError(t, x.Lock(ctx))
		a := lockAsync(ctx, h)
		waitQueued(t, rdb, k, name, 1)
		yGot := lockAsync(ctx, y)
		waitQueued(t, rdb, k, name, 2)
		time.Sleep(50 * time.Millisecond)

		release := proxy.HoldBack([]byte("g|"))
		t.Cleanup(release)
		require.NoError(t, x.Unlock(ctx)) // granted to H, its push held back
		select {
		case err := <-yGot:
			require.NoError(t, err)
		case err := <-a:
			release()
			t.Skipf("H took its grant by an attempt (%v) before it lapsed", err)
		case <-time.After(5 * time.Second):
			release()
			t.Fatal("Y never got the lock")
		}
		// H's next attempt is refused and queues it again.
		waitQueued(t, rdb, k, name, 1)
		release()
		notBothHeld(t, a, 500*time.Millisecond, "H's Lock (from a stale grant)")
		require.NoError(t, y.Unlock(ctx))
		require.NoError(t, await(t, a, 5*time.Second, "H's Lock after Y"))
		require.NoError(t, h.Unlock(ctx))
	})
}

// ShortHeartbeatKeepsPlace: a live waiter with a short heartbeat keeps its
// place ahead of a later waiter (its attempts refresh it often enough).
func ShortHeartbeatKeepsPlace(t *testing.T, k Kind) {
	if !k.Grants {
		t.Skip("this kind's waiters are not queued")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		c, rdb := redistest.NewClient(t, s)
		x, later := k.New(c, name), k.waiter(c, name)
		// (100, 200 and 500 ms lost the place on a loaded machine.)
		first := k.waiter(c, name, relock.WithHeartbeat(time.Second))
		require.NoError(t, x.Lock(ctx))
		f := lockAsync(ctx, first)
		waitQueued(t, rdb, k, name, 1)
		l := lockAsync(ctx, later)
		waitQueued(t, rdb, k, name, 2)
		time.Sleep(3 * time.Second) // 3 of first's heartbeats
		require.NoError(t, x.Unlock(ctx))
		select {
		case err := <-f:
			require.NoError(t, err)
			require.NoError(t, first.Unlock(ctx))
			require.NoError(t, await(t, l, 3*time.Second, "the later waiter's Lock"))
			require.NoError(t, later.Unlock(ctx))
		case <-l:
			t.Fatal("the later waiter was served first: the first, live, waiter lost its place")
		case <-time.After(3 * time.Second):
			t.Fatal("nobody got the lock")
		}
	})
}

// WaitSubscribed checks that a wait whose Client is still subscribed to
// the lock's channel (it lingers after the handle's previous wait) makes
// one attempt before it waits, not two: the attempt before subscribing is
// only needed when subscribing takes a round trip. The release still
// reaches the waiter by its push, which grants it the lock: no further
// command from the waiter (a lost push would leave it to the waiter's
// timer, a second later). Another handle's Lock whose ctx ended sends
// nothing (where the channel is shared, it joins the subscription). A
// round whose wait may have begun after the linger (a stalled machine)
// is not counted, and another is run.
func WaitSubscribed(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		wrdb := s.Client(t)
		cmds := &singles{}
		redistest.AddHook(wrdb, cmds)
		wc := relock.New(wrdb)
		t.Cleanup(func() { _ = wc.Close() })
		name := redistest.Name(t)
		holder, waiter := k.New(c, name), k.waiter(wc, name)
		type round struct {
			sent, after int64         // the waiter's commands before and after the release
			late        time.Duration // from its last Lock's return to its first command
			returned    time.Time     // when its Lock returned
		}
		// wait has the waiter wait behind the holder; prev is when the
		// waiter's last Lock returned, first that its Client is not
		// subscribed yet.
		wait := func(prev time.Time, first bool) round {
			require.NoError(t, holder.Lock(ctx))
			before := cmds.n.Load()
			cmds.first.Store(0)
			type locked struct {
				at  time.Time
				err error
			}
			got := make(chan locked, 1)
			go func() {
				err := waiter.Lock(ctx)
				got <- locked{time.Now(), err}
			}()
			time.Sleep(queued)
			if first {
				// Subscribing afresh: an attempt before and one after (a
				// mutex's first may be a SET NX and its script).
				assert.Eventually(t, func() bool { return cmds.n.Load()-before >= 2 }, 2*time.Second, time.Millisecond,
					"commands a waiter sent before the release, subscribing afresh: want 2 or more")
			}
			sent := cmds.n.Load()
			assert.Positive(t, sent-before, "the waiter sent no attempt before the release")
			// Meanwhile another handle's Lock, its ctx ended, joins the
			// subscription and sends nothing (no attempt, so no queue to
			// leave).
			ended, cancel := context.WithCancel(ctx)
			cancel()
			assert.ErrorIs(t, k.waiter(wc, name).Lock(ended), context.Canceled)
			assert.Equal(t, sent, cmds.n.Load(), "commands sent by a Lock whose ctx had ended")
			require.NoError(t, holder.Unlock(ctx))
			var r round
			select {
			case l := <-got:
				require.NoError(t, l.err, "the waiter's Lock")
				r.returned = l.at
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter's Lock did not return within 3 s of the release")
			}
			r.sent, r.after = sent-before, cmds.n.Load()-sent
			r.late = time.Hour // no command: not a round to count
			if at := cmds.first.Load(); at != 0 {
				r.late = time.Unix(0, at).Sub(prev)
			}
			require.True(t, waiter.Held())
			require.NoError(t, waiter.Unlock(ctx))
			return r
		}
		// Warm up: the waiter's Client loads the scripts (or the function
		// library) on its first calls.
		require.NoError(t, waiter.Lock(ctx))
		require.NoError(t, waiter.Unlock(ctx))
		r := wait(time.Now(), true)
		checked := 0
		for i := 0; i < 10 && checked == 0; i++ {
			r = wait(r.returned, false)
			// The channel lingers 250 ms (notify.Linger) from the waiter's
			// last Sub.Close, just before its last Lock returned.
			if r.late < 150*time.Millisecond {
				checked++
				assert.Equal(t, int64(1), r.sent, "commands a waiter sent before the release, its channel still subscribed (its first %v after its last Lock returned)", r.late)
				assert.Zero(t, r.after, "commands a waiter sent between the release and its Lock's return")
			}
		}
		require.Equal(t, 1, checked, "no wait in 10 began within the linger of the last")
	})
}

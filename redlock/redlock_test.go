package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

func TestLockUnlock(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		// Two processes, each with its own Clients.
		a, b := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)

		require.NoError(t, a.Lock(ctx))
		assert.True(t, a.Held())
		assert.Len(t, ms.holders(t, name), 5, "a free lock is taken on every master")
		ms.allExpire(t, name)
		ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "second owner got a held lock")

		assert.ErrorIs(t, a.Lock(ctx), relock.ErrAlreadyHeld, "lock by the holder must fail at once")
		ok, err = a.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrAlreadyHeld)
		assert.False(t, ok)
		assert.ErrorIs(t, b.Unlock(ctx), relock.ErrNotHeld, "unlock by a non-holder")
		assert.Len(t, ms.holders(t, name), 5, "a non-holder's unlock touched the lock")

		require.NoError(t, a.Unlock(ctx))
		assert.False(t, a.Held())
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld, "second unlock")
		ms.clean(t, name)

		ok, err = b.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, b.Unlock(ctx))
		ms.clean(t, name)
		assert.Nil(t, a.LostErr())
		select {
		case <-a.Lost():
			t.Fatal("Lost fired for a hold that was unlocked")
		default:
		}
	})
}

func TestWaitForRelease(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		a, b := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)
		require.NoError(t, a.Lock(ctx))

		got := make(chan time.Time, 1)
		go func() {
			if err := b.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		time.Sleep(300 * time.Millisecond)
		require.Empty(t, got, "b acquired a held lock")
		ms.allExpire(t, name) // the lock, and the waiter's queue entries
		released := time.Now()
		require.NoError(t, a.Unlock(ctx))
		select {
		case at := <-got:
			// A push from the masters, not the timer (a second at most).
			assert.Less(t, at.Sub(released), 800*time.Millisecond, "hand-off latency")
		case <-time.After(3 * time.Second):
			t.Fatal("b did not acquire after the release")
		}
		require.NoError(t, b.Unlock(ctx))
		ms.clean(t, name)
	})
}

// TestWaitLastMillisecond: a waiter refused by a holder's key in its last
// millisecond (PTTL 0) on every master tries again about a millisecond
// later, not after the one-second cap (0 was once taken for "unknown").
// On miniredis, whose TTLs stand still here until FastForward: the key
// stays in its last millisecond until the test ends it.
func TestWaitLastMillisecond(t *testing.T) {
	redistest.Parallel(t)
	ms := startMinis(t, 5)
	name := redistest.Name(t)
	ms.plant(t, name, time.Hour, 0, 1, 2, 3, 4)
	for _, m := range ms {
		m.mini.ClockTTL(false)
		m.mini.SetTTL(key(name), 500*time.Microsecond)
	}
	w := redlock.New(ms.clients(t), name)
	got := redistest.Async(func() error { return w.Lock(context.Background()) })
	time.Sleep(200 * time.Millisecond) // refused (PTTL 0), and waiting
	require.Equal(t, []int{0, 1, 2, 3, 4}, ms.holders(t, name), "the planted keys")
	for _, m := range ms {
		m.mini.FastForward(time.Millisecond)
	}
	expired := time.Now()
	r := redistest.Await(t, got, 3*time.Second, "the waiter's Lock")
	require.NoError(t, r.Err)
	waited := r.At.Sub(expired)
	t.Logf("the waiter had the lock %v after the keys expired", waited)
	assert.Less(t, waited, 300*time.Millisecond, "a waiter waited out the cap on a key in its last millisecond")
	require.NoError(t, w.Unlock(context.Background()))
}

func TestMutualExclusion(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		name := redistest.Name(t)
		processes, handles, cycles := 3, 2, 8
		if !ms.real() {
			processes, handles, cycles = 2, 2, 5 // gopher-lua is slow under -race
		}
		var counter, inside, violations, noQuorum atomic.Int64
		var wg sync.WaitGroup
		for range processes {
			cs := ms.clients(t) // each process has its own Clients
			for range handles {
				m := redlock.New(cs, name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range cycles {
						// A loaded machine can make the masters slower
						// than the attempt timeout: that is no quorum,
						// and the caller tries again.
						err := m.Lock(ctx)
						for ; errors.Is(err, redlock.ErrNoQuorum); err = m.Lock(ctx) {
							noQuorum.Add(1)
						}
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							violations.Add(1)
						}
						v := counter.Load()
						time.Sleep(200 * time.Microsecond)
						counter.Store(v + 1)
						inside.Add(-1)
						if err := m.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		assert.Equal(t, int64(processes*handles*cycles), counter.Load())
		assert.Zero(t, violations.Load())
		if n := noQuorum.Load(); n > 0 {
			t.Logf("%d attempts without a quorum in time (a loaded machine)", n)
		}
		ms.clean(t, name)
	})
}

func TestMinorityUnreachable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		what  string
		start func(t *testing.T) masters
		fail  func(t *testing.T, ms masters)
	}{
		{"blackholed", sharedReal, func(_ *testing.T, ms masters) { ms.blackhole(true, 1, 3) }},
		{"down", func(t *testing.T) masters { return startReal(t, 5) }, func(t *testing.T, ms masters) { ms.down(t, 1, 3) }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			checkGoroutines(t)
			ms := tc.start(t)
			name := redistest.Name(t)
			a, b := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)
			tc.fail(t, ms)

			start := time.Now()
			require.NoError(t, a.Lock(ctx))
			took := time.Since(start)
			t.Logf("lock with 2 of 5 masters %s: %v", tc.what, took)
			assert.Less(t, took, time.Second, "a majority answered at once")
			assert.Equal(t, []int{0, 2, 4}, ms.holders(t, name, 0, 2, 4))

			start = time.Now()
			ok, err := b.TryLock(ctx)
			require.NoError(t, err)
			assert.False(t, ok)
			t.Logf("refused trylock: %v", time.Since(start))

			// A waiter gets it on release, through the 3 masters left.
			got := make(chan error, 1)
			go func() { got <- b.Lock(ctx) }()
			time.Sleep(100 * time.Millisecond)
			start = time.Now()
			require.NoError(t, a.Unlock(ctx))
			t.Logf("unlock: %v", time.Since(start))
			select {
			case err := <-got:
				require.NoError(t, err)
				took := time.Since(start)
				t.Logf("release to waiter running: %v", took)
				// Not the attempt timeout (1 s): an attempt does not wait
				// that long for masters still busy with its earlier
				// requests once the others answered.
				assert.Less(t, took, 700*time.Millisecond, "hand-off with 2 of 5 masters %s", tc.what)
			case <-time.After(3 * time.Second):
				t.Fatal("waiter did not get the lock")
			}
			require.NoError(t, b.Unlock(ctx))
			ms.clean(t, name, 0, 2, 4)
		})
	}
}

// An attempt does not wait the whole attempt timeout for masters still
// busy with an earlier request of the handle once the others answered.
func TestBusyMasters(t *testing.T) {
	runReal(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		name := redistest.Name(t)
		m := redlock.New(ms.clients(t), name) // attempt timeout 1 s
		ms.blackhole(true, 1, 3)
		t.Cleanup(func() { ms.blackhole(false, 1, 3) })

		// Refused by 0, 2 and 4 at once; its requests to 1 and 3 stay
		// unanswered.
		ms.plant(t, name, time.Minute, 0, 2, 4)
		ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)

		// Granted by 0, refused by 2 and 4: 1 and 3 could still make a
		// majority, but they have not answered the previous attempt.
		ms.unplant(t, name, 0)
		start := time.Now()
		ok, err = m.TryLock(ctx)
		took := time.Since(start)
		require.NoError(t, err)
		assert.False(t, ok)
		t.Logf("split attempt with 2 busy masters: %v", took)
		assert.Less(t, took, 500*time.Millisecond, "waited for masters busy with the previous attempt")
		assert.Equal(t, []int{2, 4}, ms.holdersSoon(t, name, []int{2, 4}, 0, 2, 4), "the grant on 0 was not given back")
		ms.unplant(t, name, 2, 4)
		ms.clean(t, name, 0, 2, 4)
	})
}

func TestMajorityUnreachable(t *testing.T) {
	for _, tc := range []struct {
		what  string
		start func(t *testing.T) masters
		fail  func(t *testing.T, ms masters)
	}{
		{"blackholed", sharedReal, func(_ *testing.T, ms masters) { ms.blackhole(true, 0, 2, 4) }},
		{"down", func(t *testing.T) masters { return startReal(t, 5) }, func(t *testing.T, ms masters) { ms.down(t, 0, 2, 4) }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			checkGoroutines(t)
			ctx := context.Background()
			ms := tc.start(t)
			name := redistest.Name(t)
			// A 2 s lease: each attempt waits at most 200 ms for replies.
			m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(2*time.Second)), name)
			tc.fail(t, ms)

			start := time.Now()
			err := m.Lock(ctx)
			took := time.Since(start)
			t.Logf("lock with 3 of 5 masters %s: %v: %v", tc.what, took, err)
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			assert.ErrorIs(t, err, relock.ErrNotObtained)
			assert.Less(t, took, 2*time.Second, "no quorum is reported within the attempt timeout")
			assert.Contains(t, err.Error(), "2 of 5 masters could be asked or answered, 3 needed")
			assert.Empty(t, ms.holdersSoon(t, name, nil, 1, 3), "the partial grant was not given back")
			ms.clean(t, name, 1, 3)

			ok, err := m.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			assert.NotErrorIs(t, err, relock.ErrNotObtained, "TryLock does not give up on waiting")
			assert.False(t, ok)
			assert.Empty(t, ms.holdersSoon(t, name, nil, 1, 3))
			assert.ErrorIs(t, m.Unlock(ctx), relock.ErrNotHeld)
			if tc.what == "blackholed" {
				ms.blackhole(false, 0, 2, 4)
				time.Sleep(100 * time.Millisecond)
				ms.clean(t, name)
			}
		})
	}
}

func TestTryLock(t *testing.T) {
	redistest.Parallel(t)
	runOwn(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		m := redlock.New(ms.clients(t), name)

		// Another owner on 2 masters: 3 are left, a majority.
		ms.plant(t, name, time.Minute, 0, 1)
		ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, []int{0, 1, 2, 3, 4}, ms.holders(t, name))
		require.NoError(t, m.Unlock(ctx))
		assert.Equal(t, []int{0, 1}, ms.holders(t, name), "unlock touched another owner's keys")

		// On 3 masters: it holds a majority. The 2 masters this attempt
		// got are given back at once.
		ms.plant(t, name, time.Minute, 2)
		ok, err = m.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, []int{0, 1, 2}, ms.holdersSoon(t, name, []int{0, 1, 2}))
		ms.clean(t, name, 3, 4)

		// A blocking Lock gives back its partial grants too, and leaves
		// no queue entry when it gives up.
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err = m.Lock(wctx)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []int{0, 1, 2}, ms.holdersSoon(t, name, []int{0, 1, 2}))
		ms.clean(t, name, 3, 4)
		ms.noQueue(t, name)

		// Split: 2 masters someone else's, 2 free, 1 down. Nobody holds a
		// majority, but a majority answered: not a quorum failure.
		ms.unplant(t, name, 2)
		ms.down(t, 4)
		ok, err = m.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, []int{0, 1}, ms.holdersSoon(t, name, []int{0, 1}, 0, 1, 2, 3))
	})
}

func TestContextEnd(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		name := redistest.Name(t)
		a, b := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)
		require.NoError(t, a.Lock(ctx))

		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.Lock(wctx)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), time.Second)
		ms.noQueue(t, name)
		assert.False(t, b.Held())
		assert.Nil(t, b.Lost(), "no hold, no Lost channel")

		require.NoError(t, a.Unlock(ctx))
		ms.clean(t, name)

		// A ctx that is already done takes nothing.
		dead, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, b.Lock(dead), context.Canceled)
		ms.clean(t, name)
	})
}

func TestLostMajority(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		t.Run("gone", func(t *testing.T) {
			checkGoroutines(t)
			name := redistest.Name(t)
			// Renewed every 500 ms.
			m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(1500*time.Millisecond)), name)
			lock(t, m)
			// Lock returns once a majority granted: a late grant that
			// landed after the deletion below would make its master hold
			// the lock again (CI87: master 0's SET NX after its DEL).
			require.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)

			// Gone on 2 masters: a majority still holds it.
			ms.unplant(t, name, 0, 1)
			time.Sleep(1200 * time.Millisecond)
			require.False(t, closed(m.Lost()), "lost with a majority left: %v", m.LostErr())
			assert.True(t, m.Held())
			ok, err := redlock.New(ms.clients(t), name).TryLock(ctx)
			require.NoError(t, err)
			assert.False(t, ok, "the lock expired on the masters left while held")

			// And on a third: lost at the next renewal.
			ms.unplant(t, name, 2)
			within(t, m.Lost(), 2*time.Second, "Lost after the majority was gone")
			assert.ErrorIs(t, m.LostErr(), relock.ErrNotHeld)
			assert.ErrorIs(t, m.LostErr(), relock.ErrLockGone)
			assert.False(t, m.Held())
			assert.ErrorIs(t, m.Lock(ctx), relock.ErrNotHeld, "a lost hold's unlock is owed first")
			err = m.Unlock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotHeld)
			assert.ErrorIs(t, err, relock.ErrLockGone)
			ms.clean(t, name)
			lock(t, m) // a new hold after the loss was reported
			require.NoError(t, m.Unlock(ctx))
		})
		if !ms.real() {
			return
		}
		t.Run("unreachable", func(t *testing.T) {
			checkGoroutines(t)
			name := redistest.Name(t)
			m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(1500*time.Millisecond)), name)
			lock(t, m)
			ms.blackhole(true, 0, 1)
			time.Sleep(2 * time.Second)
			require.False(t, closed(m.Lost()), "lost with 3 of 5 masters renewing: %v", m.LostErr())
			ms.blackhole(true, 2)
			start := time.Now()
			within(t, m.Lost(), 3*time.Second, "Lost after a majority stopped confirming")
			t.Logf("lost %v after the third master went dark", time.Since(start))
			assert.ErrorIs(t, m.LostErr(), relock.ErrLeaseExpired)
			err := m.Unlock(ctx)
			assert.ErrorIs(t, err, relock.ErrNotHeld)
			assert.ErrorIs(t, err, relock.ErrLeaseExpired)
			ms.blackhole(false, 0, 1, 2)
		})
	})
}

func TestWatchdogKeepsLock(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(time.Second)), name)
		lock(t, m)
		time.Sleep(2 * time.Second) // 2 leases
		ok, err := redlock.New(ms.clients(t), name).TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "the lock expired while held under the watchdogs")
		require.False(t, closed(m.Lost()), "lost while renewed: %v", m.LostErr())
		// Renewed on a majority at least: Lock returns on a majority, and
		// a master whose reply never came (its read timeout, on a loaded
		// machine) has no part to renew (see TestStaleRenewal).
		renewed := 0
		for i := range ms {
			ttl := ms[i].admin.PTTL(ctx, key(name)).Val()
			if ttl > 0 {
				renewed++
				assert.LessOrEqual(t, ttl, time.Second, "master %d", i)
			}
		}
		assert.GreaterOrEqual(t, renewed, len(ms)/2+1, "masters with the lock after 2 leases")
		require.NoError(t, m.Unlock(ctx))
		ms.clean(t, name)
	})
}

func TestFixedLease(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		a := redlock.New(ms.clients(t), name, relock.WithLease(300*time.Millisecond))
		b := redlock.New(ms.clients(t), name)
		start := time.Now()
		lock(t, a)
		for i := range ms {
			assert.LessOrEqual(t, ms[i].admin.PTTL(ctx, key(name)).Val(), 300*time.Millisecond)
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		require.NoError(t, b.Lock(wctx))
		assert.False(t, a.Held(), "a still held when b's Lock returned") // its timers may not have fired
		assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "acquired before the lease ran out")
		within(t, a.Lost(), time.Second, "Lost at the end of a fixed lease")
		assert.ErrorIs(t, a.LostErr(), relock.ErrLeaseExpired)
		held := ms.holders(t, name) // b's: a majority, maybe all
		assert.GreaterOrEqual(t, len(held), 3)
		err := a.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrLeaseExpired)
		assert.Equal(t, held, ms.holders(t, name), "a stale unlock released the new owner's lock")
		require.NoError(t, b.Unlock(ctx))
		ms.clean(t, name)
	})
}

func TestClientsClosed(t *testing.T) {
	run(t, func(t *testing.T, ms masters) {
		checkGoroutines(t)
		ctx := context.Background()
		name := redistest.Name(t)
		cs := ms.clients(t)
		m := redlock.New(cs, name)
		require.NoError(t, m.Lock(ctx))
		time.Sleep(100 * time.Millisecond) // let a master slower than the majority join the hold
		require.NoError(t, cs[0].Close())
		require.NoError(t, cs[1].Close())
		assert.False(t, closed(m.Lost()), "lost with 3 of 5 Clients open")
		require.NoError(t, cs[2].Close())
		within(t, m.Lost(), time.Second, "Lost when a majority of Clients closed")
		assert.ErrorIs(t, m.LostErr(), relock.ErrClosed)
		err := m.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.ErrorIs(t, err, relock.ErrClosed)
		ms.clean(t, name) // the unlock still deleted the keys

		err = m.Lock(ctx)
		assert.ErrorIs(t, err, redlock.ErrNoQuorum)
		assert.ErrorIs(t, err, relock.ErrClosed)
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		ms.clean(t, name)
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	ms := startMinis(t, 3)
	cs := ms.clients(t)
	other := relock.New(redis.NewClient(&redis.Options{Addr: ms[0].addr}))
	t.Cleanup(func() { _ = other.Close() })
	for _, tc := range []struct {
		what    string
		clients []*relock.Client
		name    string
		opts    []relock.LockOption
		want    error
	}{
		{"no master", nil, "x", nil, relock.ErrInvalidOption},
		{"nil client", []*relock.Client{cs[0], nil, cs[2]}, "x", nil, relock.ErrNilClient},
		{"nil first", []*relock.Client{nil, cs[1], cs[2]}, "x", nil, relock.ErrNilClient},
		{"all nil", []*relock.Client{nil, nil, nil}, "x", nil, relock.ErrNilClient},
		{"empty slice", []*relock.Client{}, "x", nil, relock.ErrInvalidOption},
		{"nil redis", []*relock.Client{cs[0], relock.New(nil), cs[2]}, "x", nil, relock.ErrNilClient},
		{"same client twice", []*relock.Client{cs[0], cs[1], cs[0]}, "x", nil, relock.ErrInvalidOption},
		{"same server twice", []*relock.Client{cs[0], cs[1], other}, "x", nil, relock.ErrInvalidOption},
		{"empty name", cs, "", nil, relock.ErrInvalidName},
		{"bad lease", cs, "x", []relock.LockOption{relock.WithLease(time.Millisecond)}, relock.ErrInvalidOption},
		{"fencing", cs, "x", []relock.LockOption{relock.WithFencing()}, relock.ErrInvalidOption},
		{"sync replicas", cs, "x", []relock.LockOption{relock.WithSyncReplicas(1, time.Second)}, relock.ErrInvalidOption},
	} {
		t.Run(tc.what, func(t *testing.T) {
			m := redlock.New(tc.clients, tc.name, tc.opts...)
			assert.ErrorIs(t, m.Lock(ctx), tc.want)
			ok, err := m.TryLock(ctx)
			assert.ErrorIs(t, err, tc.want)
			assert.False(t, ok)
			assert.ErrorIs(t, m.Unlock(ctx), tc.want)
			assert.Nil(t, m.Lost())
			assert.False(t, m.Held())
		})
	}
	for i := range ms {
		assert.Empty(t, ms[i].mini.Keys(), "bad input touched master %d", i)
	}

	t.Run("even and single", func(t *testing.T) {
		ms := startMinis(t, 4)
		for _, n := range []int{1, 2, 4} {
			name := redistest.Name(t)
			m := redlock.New(ms[:n].clients(t), name)
			require.NoError(t, m.Lock(ctx), "%d masters", n)
			require.NoError(t, m.Unlock(ctx), "%d masters", n)
		}
		// 4 masters, majority 3: one may fail.
		name := redistest.Name(t)
		ms.plant(t, name, time.Minute, 0)
		m := redlock.New(ms.clients(t), name)
		ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, m.Unlock(ctx))
		ms.plant(t, name, time.Minute, 1)
		ok, err = m.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "2 of 4 masters are no majority")
	})
}

func TestEvents(t *testing.T) {
	redistest.Parallel(t)
	ms := startMinis(t, 3)
	ctx := context.Background()
	var mu sync.Mutex
	var got []relock.Event
	obs := relock.WithObserver(func(e relock.Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	})
	cs := ms.clients(t, obs)
	name := redistest.Name(t)
	m := redlock.New(cs, name)
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Lock(ctx))
	require.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2}), 3, "the late grant landed") // see TestLostMajority
	ms.unplant(t, name, 0, 1)
	require.ErrorIs(t, m.Unlock(ctx), relock.ErrLockGone)

	mu.Lock()
	defer mu.Unlock()
	var types []relock.EventType
	for _, e := range got {
		types = append(types, e.Type)
		assert.Equal(t, redlock.Kind, e.Kind)
		assert.Equal(t, name, e.Name)
		assert.Len(t, e.Owner, 8)
	}
	assert.Equal(t, []relock.EventType{relock.EventAcquired, relock.EventReleased, relock.EventAcquired, relock.EventLost}, types)
}

// A lost wake-up (a broken subscription) delays a waiter by its timer, at
// most a second, and never hangs it.
func TestLostPushes(t *testing.T) {
	redistest.Parallel(t)
	runReal(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		a, b := redlock.New(ms.clients(t), name), redlock.New(ms.clients(t), name)
		require.NoError(t, a.Lock(ctx))
		for _, m := range ms {
			m.proxy.Drop([]byte("message")) // every published message
		}
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, a.Unlock(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(2500 * time.Millisecond):
			t.Fatal("waiter hung without its wake-up")
		}
		require.NoError(t, b.Unlock(ctx))
	})
}

// Clients made with relock.WithPolling never subscribe: a waiter polls at
// their interval.
func TestPolling(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		a := redlock.New(ms.clients(t), name)
		b := redlock.New(ms.clients(t, relock.WithPolling(50*time.Millisecond)), name)
		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond)
		for i, m := range ms {
			n := m.admin.PubSubNumSub(ctx, key(name)).Val()[key(name)]
			assert.Zero(t, n, "master %d: a polling waiter subscribed", i)
		}
		require.NoError(t, a.Unlock(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(time.Second):
			t.Fatal("polling waiter did not get the lock")
		}
		require.NoError(t, b.Unlock(ctx))
		ms.clean(t, name)
	})
}

// TestTryLockRace: four owners, each on Clients of its own, call TryLock
// at the same moment on the five masters, round after round. Never do
// two get it; and when they split the masters (nobody got a majority),
// TryLock's retries settle it, so that a round nobody won is rare.
func TestTryLockRace(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		const owners, rounds = 4, 40
		handles := make([]*redlock.Mutex, owners)
		for i := range handles {
			handles[i] = redlock.New(ms.clients(t), name)
		}
		empty := 0
		for r := 0; r < rounds; r++ {
			start := make(chan struct{})
			got := make([]bool, owners)
			var wg sync.WaitGroup
			for i, h := range handles {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ok, err := h.TryLock(ctx)
					assert.NoError(t, err)
					got[i] = ok
				}()
			}
			close(start)
			wg.Wait()
			winners := 0
			for i, ok := range got {
				if ok {
					winners++
					require.NoError(t, handles[i].Unlock(ctx))
				}
			}
			require.LessOrEqual(t, winners, 1, "round %d: two owners at once", r)
			if winners == 0 {
				empty++
			}
		}
		t.Logf("%d of %d rounds without a winner", empty, rounds)
		assert.LessOrEqual(t, empty, rounds/10, "rounds that nobody won")
		assert.Empty(t, ms.holdersSoon(t, name, nil), "parts of attempts left on masters")
	})
}

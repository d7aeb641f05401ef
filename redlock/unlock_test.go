package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/watchdog"
	"github.com/relock-go/relock/redlock"
)

// ended returns contexts that ended before the call: cancelled, and past
// their deadline.
func ended(t *testing.T) map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return map[string]context.Context{"cancelled": cancelled, "deadline-passed": expired}
}

// An Unlock whose ctx has ended still releases on every master: it waits
// for a majority's confirmation (and a grace for the others), and a
// release still on its way when it returns lands soon after.
func TestUnlockEndedContext(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		for what, ctx := range ended(t) {
			t.Run(what, func(t *testing.T) {
				name := redistest.Name(t)
				m := redlock.New(ms.clients(t), name)
				lock(t, m)
				require.NoError(t, m.Unlock(ctx))
				assert.False(t, m.Held())
				assert.Empty(t, ms.holdersSoon(t, name, nil), "the release did not reach every master")
				ms.clean(t, name)

				other := redlock.New(ms.clients(t), name)
				ok, err := other.TryLock(context.Background())
				require.NoError(t, err)
				assert.True(t, ok, "the lock is not free after an Unlock with an ended ctx")
				require.NoError(t, other.Unlock(context.Background()))
			})
		}
	})
}

// renewals counts the watchdog's renewals of one lock key sent through a
// go-redis client, with when each was sent: the watchdog is the only one
// to pipeline, and its renewals are script calls naming the key.
type renewals struct {
	key  string
	mu   sync.Mutex
	sent []time.Time
}

func (r *renewals) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (r *renewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (r *renewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		now := time.Now()
		for _, c := range cmds {
			if !redistest.IsScript(c.Name()) {
				continue
			}
			for _, a := range c.Args() {
				if a == r.key {
					r.mu.Lock()
					r.sent = append(r.sent, now)
					r.mu.Unlock()
					break
				}
			}
		}
		return next(ctx, cmds)
	}
}

// since returns how many renewals were sent at or after t.
func (r *renewals) since(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.sent {
		if !s.Before(t) {
			n++
		}
	}
	return n
}

// proxied returns the masters ms, each reached through a new proxy of t's
// own (a miniredis gets one too) that can blackhole it without touching
// the other tests on the same server.
func proxied(t *testing.T, ms masters) masters {
	var out masters
	for _, m := range ms {
		c := *m
		c.proxy = redistest.NewProxy(t, c.admin.Options().Addr)
		c.addr = c.proxy.Addr
		out = append(out, &c)
	}
	return out
}

// A master unreachable during Unlock: a majority confirms (nil, whether
// ctx is live or ended), the renewals of every part stop when Unlock is
// called, and what the unreachable master keeps expires within one lease.
func TestUnlockMasterUnreachable(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctxs := ended(t)
		ctxs["live"] = context.Background()
		for what, ctx := range ctxs {
			t.Run(what, func(t *testing.T) {
				redistest.Parallel(t) // no checkGoroutines: it counts the goroutines of parallel tests too
				ms := proxied(t, ms[:3])
				name := redistest.Name(t)
				const lease = 1500 * time.Millisecond // renewed every 500 ms
				var cs []*relock.Client
				var rs []*renewals
				for _, ma := range ms {
					r := &renewals{key: key(name)}
					rdb := redis.NewClient(&redis.Options{Addr: ma.addr, DialTimeout: 500 * time.Millisecond,
						ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
					redistest.AddHook(rdb, r)
					_ = rdb.Ping(context.Background()).Err()
					c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
					t.Cleanup(func() {
						_ = c.Close()
						_ = rdb.Close()
					})
					cs, rs = append(cs, c), append(rs, r)
				}
				m := redlock.New(cs, name)
				lock(t, m)
				time.Sleep(700 * time.Millisecond) // a renewal on each master
				for i, r := range rs {
					require.NotZero(t, r.since(time.Time{}), "master %d: no renewal seen while held", i)
				}

				ms.blackhole(true, 2)
				t.Cleanup(func() { ms.blackhole(false, 2) })
				called := time.Now()
				require.NoError(t, m.Unlock(ctx), "released on 2 of 3 masters")
				t.Logf("unlock with a master unreachable (%s ctx): %v", what, time.Since(called))
				assert.False(t, m.Held())
				assert.False(t, closed(m.Lost()), "an unlocked hold is not lost")
				assert.Empty(t, ms.holders(t, name, 0, 1))

				// Master 2 keeps the key until its lease ends, no longer:
				// nothing renews it, nor anything else.
				var lastSeen time.Time
				prev := lease
				for deadline := called.Add(3 * lease); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					at := time.Now()
					ttl, err := ms[2].admin.PTTL(context.Background(), key(name)).Result()
					require.NoError(t, err)
					if ttl == -2 { // gone (0: under a millisecond left)
						break
					}
					require.GreaterOrEqual(t, ttl, time.Duration(0), "the key on the unreachable master has no TTL")
					lastSeen = at
					assert.LessOrEqual(t, ttl, prev, "the key's TTL on the unreachable master went up")
					prev = ttl
				}
				assert.Empty(t, ms.holders(t, name, 2), "the key on the unreachable master outlived its lease")
				assert.Less(t, lastSeen.Sub(called), lease+watchdog.Drift(lease),
					"the key on the unreachable master was there longer than a lease after Unlock was called")
				for i, r := range rs {
					assert.Zero(t, r.since(called), "master %d: renewals sent after Unlock was called", i)
				}
				ms.blackhole(false, 2)
				ms.clean(t, name)
			})
		}
	})
}

// A hold granted by only a bare majority (another owner's key on one
// master) whose granting master is unreachable at Unlock: the release is
// confirmed on one master, so Unlock returns ErrNoQuorum, says the master
// that refused did not have it, and the hold ends all the same.
func TestUnlockBareMajorityUnreachable(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		ms = proxied(t, ms[:3])
		name := redistest.Name(t)
		ms.plant(t, name, 10*time.Second, 1)
		m := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(2*time.Second)), name) // Unlock waits 1 s
		lock(t, m)
		assert.Equal(t, []int{0, 1, 2}, ms.holders(t, name)) // 1: the planted key

		ms.blackhole(true, 2)
		t.Cleanup(func() { ms.blackhole(false, 2) })
		err := m.Unlock(ctx)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		assert.NotErrorIs(t, err, relock.ErrNotHeld, "the hold was not known to be lost")
		assert.Contains(t, err.Error(), "released on 1 of 3 masters, 2 needed (1 did not have it)")
		assert.False(t, m.Held())
		assert.Equal(t, []int{1}, ms.holders(t, name, 0, 1), "the release on master 0 did not happen")
		ms.blackhole(false, 2)
		ms.unplant(t, name, 1)
		ms.clean(t, name, 0, 1)
		_ = ms[2].admin.Del(ctx, key(name)).Err() // left to its 2 s lease
	})
}

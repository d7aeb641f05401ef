package inspect_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/rwlock"
)

// contended is a lock held by some owners with a waiter behind them, as
// ForceUnlock's tests need it.
type contended struct {
	kind string
	// hold makes the lock called name held, starts its waiter, and
	// returns the waiter's Held and a third owner's TryLock.
	hold func(t *testing.T, ctx context.Context, c *relock.Client, name string, woken chan<- error) (held func() bool, try func() bool)
}

var contendeds = []contended{
	{"mutex", func(t *testing.T, ctx context.Context, c *relock.Client, name string, woken chan<- error) (func() bool, func() bool) {
		a, w, third := mutex.New(c, name), mutex.New(c, name), mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		go func() { woken <- w.Lock(ctx) }()
		t.Cleanup(func() { _ = w.Unlock(context.Background()) })
		return w.Held, func() bool {
			ok, err := third.TryLock(ctx)
			require.NoError(t, err)
			return ok
		}
	}},
	{"rwlock", func(t *testing.T, ctx context.Context, c *relock.Client, name string, woken chan<- error) (func() bool, func() bool) {
		r1, r2, w, third := rwlock.New(c, name), rwlock.New(c, name), rwlock.New(c, name), rwlock.New(c, name)
		require.NoError(t, r1.RLock(ctx))
		require.NoError(t, r2.RLock(ctx))
		go func() { woken <- w.Lock(ctx) }()
		t.Cleanup(func() { _ = w.Unlock(context.Background()) })
		return w.Held, func() bool {
			ok, err := third.TryRLock(ctx)
			require.NoError(t, err)
			return ok
		}
	}},
}

// TestForceUnlockResent: the operator's force-unlock (only the holders
// shown) loses its reply; go-redis sends it again once the waiter it woke
// holds the lock. The resend answers as the first run did (Deleted, not
// "held by others"), and the waiter keeps its hold.
func TestForceUnlockResent(t *testing.T) {
	redistest.Parallel(t)
	run := func(t *testing.T, s *redistest.Server) {
		for _, tc := range contendeds {
			t.Run(tc.kind, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, rdb := redistest.NewClient(t, s)
				name := redistest.Name(t)
				woken := make(chan error, 1)
				held, try := tc.hold(t, ctx, c, name, woken)
				time.Sleep(200 * time.Millisecond) // the waiter waits
				locks, err := inspect.Read(ctx, rdb, []inspect.Ref{{Kind: tc.kind, Name: name}})
				require.NoError(t, err)
				require.Len(t, locks, 1)

				lose := &redistest.LoseReply{}
				ordb := s.Client(t, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
				lose.Install(ordb)
				oc := relock.New(ordb)
				t.Cleanup(func() { _ = oc.Close() })
				var werr error
				lose.OnLost = func() {
					select {
					case werr = <-woken:
					case <-time.After(5 * time.Second):
						werr = errors.New("the waiter did not get the force-unlocked lock")
					}
				}
				lose.Arm([]byte(name))
				out, err := inspect.ForceUnlock(ctx, oc, locks[0])
				require.NoError(t, err)
				require.EqualValues(t, 1, lose.Lost.Load(), "no reply was lost: nothing was tested")
				assert.Equal(t, force.Deleted, out, "the resend did not answer as the first run")
				require.NoError(t, werr)
				assert.True(t, held())
				assert.False(t, try(), "a third owner got in while the woken waiter holds the lock")
			})
		}
	}
	redistest.Run(t, run)
	t.Run("cluster", func(t *testing.T) { run(t, redistest.ClusterServer(t)) })
}

// TestForceUnlockResentDuringMigration: a force-unlock whose reply is
// lost is sent again by go-redis while the lock's slot starts migrating
// (refused: TRYAGAIN), and by the handle once the slot has moved, after
// the waiter it woke took the lock. The last run, on the new master,
// answers as the first did, and deletes nothing: neither the operator's
// (only the holders shown) nor the lock packages' (whatever the owner).
func TestForceUnlockResentDuringMigration(t *testing.T) {
	redistest.Parallel(t)
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	a, b := cl.Nodes[0], cl.Nodes[1]
	for _, only := range []bool{true, false} {
		t.Run("only-shown="+strconv.FormatBool(only), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rdb := cl.Client(t)
			c := relock.New(rdb)
			t.Cleanup(func() { _ = c.Close() })
			base := redistest.Name(t)
			var name string
			for i := 0; ; i++ {
				name = base + "." + strconv.Itoa(i)
				m, err := rdb.MasterForKey(ctx, "relock:mutex:{"+name+"}")
				require.NoError(t, err)
				if m.Options().Addr == a.Addr {
					break
				}
			}
			slot, err := rdb.ClusterKeySlot(ctx, "relock:mutex:{"+name+"}").Result()
			require.NoError(t, err)
			woken := make(chan error, 1)
			held, try := contendeds[0].hold(t, ctx, c, name, woken)
			time.Sleep(200 * time.Millisecond) // the waiter waits
			locks, err := inspect.Read(ctx, rdb, []inspect.Ref{{Kind: "mutex", Name: name}})
			require.NoError(t, err)
			require.Len(t, locks, 1)

			lose := &redistest.LoseReply{}
			ordb := cl.Client(t, func(o *redis.ClusterOptions) { o.ReadTimeout = 10 * time.Second })
			lose.Install(ordb)
			oc := relock.New(ordb)
			t.Cleanup(func() { _ = oc.Close() })
			var werr error
			migrating := make(chan struct{})
			lose.OnLost = func() {
				select {
				case werr = <-woken:
				case <-time.After(5 * time.Second):
					werr = errors.New("the waiter did not get the force-unlocked lock")
				}
				werr = errors.Join(werr, redistest.BeginMigration(ctx, slot, a, b))
				close(migrating)
			}
			lose.Arm([]byte(name))
			type result struct {
				deleted bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				if only {
					out, err := inspect.ForceUnlock(ctx, oc, locks[0])
					done <- result{out == force.Deleted, err}
					return
				}
				ok, err := mutex.New(oc, name).ForceUnlock(ctx)
				done <- result{ok, err}
			}()
			select {
			case <-migrating:
			case <-time.After(10 * time.Second):
				t.Fatal("no reply was lost")
			}
			time.Sleep(300 * time.Millisecond) // refused while the slot migrates
			select {
			case r := <-done:
				t.Fatalf("force-unlock returned while the slot was migrating: %v, %v", r.deleted, r.err)
			default:
			}
			require.NoError(t, redistest.FinishMigration(ctx, slot, a, b, 0))
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("force-unlock never returned after the migration")
			}
			require.NoError(t, werr)
			require.NoError(t, r.err)
			assert.True(t, r.deleted, "the resend did not answer as the first run")
			assert.True(t, held())
			assert.False(t, try(), "a third owner got in while the woken waiter holds the lock")
		})
	}
}

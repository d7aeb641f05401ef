package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// holder is the exclusive side of a lock handle.
type holder interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
}

var kinds = []struct {
	kind string
	new  func(c *relock.Client, name string) holder
}{
	{"mutex", func(c *relock.Client, name string) holder { return mutex.New(c, name) }},
	{"reentrant", func(c *relock.Client, name string) holder { return reentrant.New(c, name) }},
	{"fair", func(c *relock.Client, name string) holder { return fair.New(c, name) }},
	{"rwlock", func(c *relock.Client, name string) holder { return rwlock.New(c, name) }},
	{"semaphore", func(c *relock.Client, name string) holder { return permit{semaphore.New(c, name, 1)} }},
}

// permit is a one-permit semaphore as a holder.
type permit struct{ s *semaphore.Semaphore }

func (p permit) Lock(ctx context.Context) error   { return p.s.Acquire(ctx, 1) }
func (p permit) Unlock(ctx context.Context) error { return p.s.Release(ctx, 1) }
func (p permit) Lost() <-chan struct{}            { return p.s.Lost() }

// owners returns the fingerprints of the owners of the kind lock called
// name.
func owners(t *testing.T, s *redistest.Server, kind, name string) []string {
	t.Helper()
	locks, err := inspect.Read(context.Background(), s.Client(t), []inspect.Ref{{Kind: kind, Name: name}})
	require.NoError(t, err)
	if len(locks) == 0 {
		return nil
	}
	return fingerprints(locks[0])
}

// TestForceUnlock: with -yes, the lock is deleted whoever holds it; its
// waiter gets it at once, and its former holder learns of the loss at its
// next renewal.
func TestForceUnlock(t *testing.T) {
	const watchdog = 300 * time.Millisecond // renewals every 100ms
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, s *redistest.Server) {
				redistest.CheckGoroutines(t)
				ctx := context.Background()
				c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(watchdog))
				name := redistest.Name(t)
				h, w := k.new(c, name), k.new(c, name)
				require.NoError(t, h.Lock(ctx))
				was := owners(t, s, k.kind, name)
				require.Len(t, was, 1)

				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				acquired := make(chan time.Time, 1)
				go func() {
					if err := w.Lock(wctx); err == nil {
						acquired <- time.Now()
					}
					close(acquired)
				}()
				time.Sleep(50 * time.Millisecond) // the waiter waits

				start := time.Now()
				r := relockCmd(t, "", "-redis", redisURL(s), "-yes", "force-unlock", name)
				require.Equal(t, 0, r.code)
				assert.Equal(t, "deleted "+k.kind+` "`+name+`" held by `+was[0]+"\n", r.stdout)
				assert.Empty(t, r.stderr)

				select {
				case at, ok := <-acquired:
					require.True(t, ok, "the waiter's Lock failed")
					assert.Less(t, at.Sub(start), 500*time.Millisecond, "the waiter was not woken")
				case <-time.After(time.Second):
					t.Fatal("the waiter did not get the lock")
				}
				assert.NotContains(t, owners(t, s, k.kind, name), was[0], "the former holder still holds it")
				select {
				case <-h.Lost():
					t.Logf("Lost after %v", time.Since(start))
					// The next renewal (every watchdog/3) finds the lock gone;
					// some slack for a loaded machine.
					assert.Less(t, time.Since(start), watchdog/3+200*time.Millisecond, "Lost fired later than the next renewal")
				case <-time.After(time.Second):
					t.Fatal("the former holder's Lost never fired")
				}
				assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld)
				require.NoError(t, w.Unlock(ctx))

				r = relockCmd(t, "", "-redis", redisURL(s), "-yes", "force-unlock", name)
				assert.Equal(t, 1, r.code, "nothing left to delete")
			})
		})
	}
}

// TestForceUnlockAsks: without -yes, each held lock is deleted only if
// the answer on stdin is yes.
func TestForceUnlockAsks(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		m, re := mutex.New(c, name), reentrant.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
		require.NoError(t, re.Lock(ctx))
		mo, ro := owners(t, s, "mutex", name), owners(t, s, "reentrant", name)

		askM := `force-unlock mutex "` + name + `" held by ` + mo[0] + "? [y/N] "
		askR := `force-unlock reentrant "` + name + `" held by ` + ro[0] + "? [y/N] "
		for stdin, answers := range map[string][2]string{"n\nn\n": {"n", "n"}, "\nno": {"", "no"}, "": {"", ""}} {
			r := relockCmd(t, stdin, "-redis", redisURL(s), "force-unlock", name)
			assert.Equal(t, 1, r.code)
			assert.Empty(t, r.stdout)
			assert.Equal(t, askM+answers[0]+"\n"+askR+answers[1]+"\nrelock: nothing deleted\n", r.stderr)
			assert.Equal(t, mo, owners(t, s, "mutex", name))
			assert.Equal(t, ro, owners(t, s, "reentrant", name))
		}

		r := relockCmd(t, "n\ny\n", "-redis", redisURL(s), "force-unlock", name)
		assert.Equal(t, 0, r.code)
		assert.Equal(t, askM+"n\n"+askR+"y\n", r.stderr)
		assert.Equal(t, `deleted reentrant "`+name+`" held by `+ro[0]+"\n", r.stdout)
		assert.Equal(t, mo, owners(t, s, "mutex", name), "the mutex was kept")
		assert.Empty(t, owners(t, s, "reentrant", name), "the reentrant lock was deleted")

		r = relockCmd(t, "yes\n", "-redis", redisURL(s), "-json", "force-unlock", name)
		assert.Equal(t, 0, r.code)
		assert.JSONEq(t, `{"kind":"mutex","name":"`+name+`","deleted":true,"owners":["`+mo[0]+`"]}`, r.stdout)
		assert.Empty(t, owners(t, s, "mutex", name))
	})
}

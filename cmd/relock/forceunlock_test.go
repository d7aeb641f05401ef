package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
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
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
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

				lost := make(chan time.Time, 1)
				go func() {
					select {
					case <-h.Lost():
						lost <- time.Now()
					case <-wctx.Done():
					}
					close(lost)
				}()
				start := time.Now()
				r := relockCmd(t, "", "-redis", redisURL(s), "-yes", "force-unlock", name)
				deleted := time.Now() // by then (the command took 279 ms on a loaded machine)
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
				case at, ok := <-lost:
					require.True(t, ok, "the former holder's Lost never fired")
					t.Logf("Lost %v after the force-unlock began, %v after it returned", at.Sub(start), at.Sub(deleted))
					// The next renewal (every watchdog/3) after the deletion
					// finds the lock gone; some slack for a loaded machine.
					assert.Less(t, at.Sub(deleted), watchdog/3+200*time.Millisecond, "Lost fired later than the next renewal")
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
	redistest.Parallel(t)
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

// servers runs f on miniredis and redis-server and, unless -short, on
// the test binary's Redis Cluster, with the flags that reach each.
func servers(t *testing.T, f func(t *testing.T, s *redistest.Server, flags []string)) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) { f(t, s, []string{"-redis", redisURL(s)}) })
	t.Run("cluster", func(t *testing.T) {
		s := redistest.ClusterServer(t)
		f(t, s, []string{"-cluster", "-redis", redisURL(s)})
	})
}

// turnover is a lock type whose lock some owners hold, and what may
// happen to its holders while the operator is asked about them.
type turnover struct {
	kind string
	// hold makes the lock called name held. change then replaces some of
	// its holders by others; keep changes only the holds of the same
	// holders (nil: the type has nothing such).
	hold func(t *testing.T, c *relock.Client, name string) (change, keep func())
}

var turnovers = []turnover{
	{"mutex", func(t *testing.T, c *relock.Client, name string) (func(), func()) {
		ctx := context.Background()
		a, b := mutex.New(c, name), mutex.New(c, name)
		require.NoError(t, a.Lock(ctx))
		t.Cleanup(func() { _ = a.Unlock(ctx); _ = b.Unlock(ctx) })
		return func() {
			require.NoError(t, a.Unlock(ctx))
			require.NoError(t, b.Lock(ctx))
		}, nil
	}},
	{"reentrant", func(t *testing.T, c *relock.Client, name string) (func(), func()) {
		ctx := context.Background()
		a, b := reentrant.New(c, name), reentrant.New(c, name)
		require.NoError(t, a.Lock(ctx))
		t.Cleanup(func() { _ = a.Unlock(ctx); _ = a.Unlock(ctx); _ = b.Unlock(ctx) })
		return func() {
			require.NoError(t, a.Unlock(ctx))
			require.NoError(t, b.Lock(ctx))
		}, func() { require.NoError(t, a.Lock(ctx)) } // a re-enters
	}},
	{"fair", func(t *testing.T, c *relock.Client, name string) (func(), func()) {
		ctx := context.Background()
		a, b := fair.New(c, name), fair.New(c, name)
		require.NoError(t, a.Lock(ctx))
		t.Cleanup(func() { _ = a.Unlock(ctx); _ = a.Unlock(ctx); _ = b.Unlock(ctx) })
		return func() {
			require.NoError(t, a.Unlock(ctx))
			require.NoError(t, b.Lock(ctx))
		}, func() { require.NoError(t, a.Lock(ctx)) }
	}},
	{"rwlock", func(t *testing.T, c *relock.Client, name string) (func(), func()) {
		ctx := context.Background()
		r1, r2, r3 := rwlock.New(c, name), rwlock.New(c, name), rwlock.New(c, name)
		require.NoError(t, r1.RLock(ctx))
		require.NoError(t, r2.RLock(ctx))
		t.Cleanup(func() {
			for _, r := range []*rwlock.RWMutex{r1, r1, r2, r3} {
				_ = r.RUnlock(ctx)
			}
		})
		return func() {
				require.NoError(t, r2.RUnlock(ctx))
				require.NoError(t, r3.RLock(ctx))
			}, func() {
				require.NoError(t, r1.RLock(ctx)) // r1 re-enters
			}
	}},
	{"semaphore", func(t *testing.T, c *relock.Client, name string) (func(), func()) {
		ctx := context.Background()
		s1, s2, s3 := semaphore.New(c, name, 3), semaphore.New(c, name, 3), semaphore.New(c, name, 3)
		require.NoError(t, s1.Acquire(ctx, 1))
		require.NoError(t, s2.Acquire(ctx, 2))
		t.Cleanup(func() {
			for _, s := range []*semaphore.Semaphore{s1, s2, s3} {
				if n := s.Held(); n > 0 {
					_ = s.Release(ctx, n)
				}
			}
		})
		return func() {
				require.NoError(t, s1.Release(ctx, 1))
				require.NoError(t, s3.Acquire(ctx, 1))
			}, func() {
				// Both keep permits, another count each.
				require.NoError(t, s2.Release(ctx, 1))
				require.NoError(t, s1.Acquire(ctx, 1))
			}
	}},
}

// answers is stdin whose first read (the command waiting for the answer
// to its first question) runs before, then reads lines.
type answers struct {
	before func()
	lines  *strings.Reader
	once   sync.Once
}

func newAnswers(before func(), lines string) *answers {
	return &answers{before: before, lines: strings.NewReader(lines)}
}

func (a *answers) Read(p []byte) (int, error) {
	a.once.Do(a.before)
	return a.lines.Read(p)
}

// asked is force-unlock's question about the kind lock called name held
// by owners.
func asked(kind, name string, owners []string) string {
	return "force-unlock " + kind + ` "` + name + `" held by ` + strings.Join(owners, ", ") + "? [y/N] "
}

// nowHeld is force-unlock's notice that the kind lock called name is held
// by now, not by owners.
func nowHeld(kind, name string, now, owners []string) string {
	return kind + ` "` + name + `" is now held by ` + strings.Join(now, ", ") + ", not " + strings.Join(owners, ", ") +
		": nothing deleted\n"
}

// TestForceUnlockHolderChanged: the operator confirms the holders shown,
// but by then other owners hold the lock (one released, another took
// it). Nothing is deleted: the command says who holds it now and asks
// again; confirmed, it deletes those holders' lock.
func TestForceUnlockHolderChanged(t *testing.T) {
	redistest.Parallel(t)
	servers(t, func(t *testing.T, s *redistest.Server, flags []string) {
		for _, tc := range turnovers {
			t.Run(tc.kind, func(t *testing.T) {
				c, _ := redistest.NewClient(t, s)
				for _, second := range []string{"n", "y"} {
					name := redistest.Name(t) + "." + second
					change, _ := tc.hold(t, c, name)
					was := owners(t, s, tc.kind, name)
					var now []string
					in := newAnswers(func() {
						change()
						now = owners(t, s, tc.kind, name)
					}, "y\n"+second+"\n")
					r := relockCmdIn(t, in, append(flags, "force-unlock", name)...)
					require.NotEmpty(t, now)
					require.NotEqual(t, was, now)
					question := asked(tc.kind, name, was) + "y\n" + nowHeld(tc.kind, name, now, was) + asked(tc.kind, name, now) + second + "\n"
					if second == "n" {
						assert.Equal(t, 1, r.code)
						assert.Empty(t, r.stdout)
						assert.Equal(t, question+"relock: nothing deleted\n", r.stderr)
						assert.Equal(t, now, owners(t, s, tc.kind, name), "holders the operator never confirmed were deleted")
						continue
					}
					assert.Equal(t, 0, r.code)
					assert.Equal(t, question, r.stderr)
					assert.Equal(t, "deleted "+tc.kind+` "`+name+`" held by `+strings.Join(now, ", ")+"\n", r.stdout)
					assert.Empty(t, owners(t, s, tc.kind, name))
				}
			})
		}
	})
}

// TestForceUnlockSameHolders: the holders shown are still the holders
// when the operator confirms, with other counts (a re-entry, permits
// taken and given back): "the same holders", deleted.
func TestForceUnlockSameHolders(t *testing.T) {
	redistest.Parallel(t)
	servers(t, func(t *testing.T, s *redistest.Server, flags []string) {
		for _, tc := range turnovers {
			if tc.kind == "mutex" {
				continue // a mutex's holder has nothing but its one hold
			}
			t.Run(tc.kind, func(t *testing.T) {
				c, _ := redistest.NewClient(t, s)
				name := redistest.Name(t)
				_, keep := tc.hold(t, c, name)
				was := owners(t, s, tc.kind, name)
				r := relockCmdIn(t, newAnswers(keep, "y\n"), append(flags, "force-unlock", name)...)
				assert.Equal(t, 0, r.code)
				assert.Equal(t, asked(tc.kind, name, was)+"y\n", r.stderr)
				assert.Equal(t, "deleted "+tc.kind+` "`+name+`" held by `+strings.Join(was, ", ")+"\n", r.stdout)
				assert.Empty(t, owners(t, s, tc.kind, name))
				// The request's record stays a while, and is no lock.
				require.NotEmpty(t, s.Keys(t, "relock:"+tc.kind+":{"+name+"}:f:*"))
				locks, err := inspect.List(context.Background(), s.Client(t), name)
				require.NoError(t, err)
				assert.Empty(t, locks, "a force-unlock's record listed as a lock")
			})
		}
	})
}

// TestForceUnlockYesHolderChanged: with -yes, a lock whose holders
// changed between reading and deleting it is not deleted, and the
// command fails saying so; a lock released meanwhile is reported as such.
func TestForceUnlockYesHolderChanged(t *testing.T) {
	redistest.Exclusive(t, "it sets beforeForceUnlock, which every force-unlock of the process calls")
	t.Cleanup(func() { beforeForceUnlock = nil })
	servers(t, func(t *testing.T, s *redistest.Server, flags []string) {
		for _, tc := range turnovers {
			t.Run(tc.kind, func(t *testing.T) {
				c, rdb := redistest.NewClient(t, s)
				for _, asJSON := range []bool{false, true} {
					name := redistest.Name(t)
					change, _ := tc.hold(t, c, name)
					was := owners(t, s, tc.kind, name)
					var now []string
					beforeForceUnlock = func(inspect.Lock) {
						change()
						now = owners(t, s, tc.kind, name)
					}
					args := append(flags, "-yes", "force-unlock", name)
					if asJSON {
						args = append(flags, "-yes", "-json", "force-unlock", name)
					}
					r := relockCmd(t, "", args...)
					beforeForceUnlock = nil
					require.NotEqual(t, was, now)
					assert.Equal(t, 1, r.code)
					assert.Equal(t, now, owners(t, s, tc.kind, name), "holders the command never read were deleted")
					assert.Equal(t, "relock: "+tc.kind+` "`+name+`" not deleted: held by other owners than those read `+
						"(with -yes only those are deleted; run force-unlock again to delete the new holders)\n", r.stderr)
					if asJSON {
						assert.JSONEq(t, `{"kind":"`+tc.kind+`","name":"`+name+`","deleted":false,"owners":`+jsonList(was)+
							`,"changed":true,"now_owners":`+jsonList(now)+`}`, r.stdout)
					} else {
						assert.Equal(t, nowHeld(tc.kind, name, now, was), r.stdout)
					}
					if tc.kind == "mutex" {
						tok, _, _ := strings.Cut(rdb.Get(context.Background(), "relock:mutex:{"+name+"}").Val(), ":")
						require.NotEmpty(t, tok)
						assert.NotContains(t, r.stdout+r.stderr, tok, "an owner token was shown")
					}
				}
			})
		}
		t.Run("released", func(t *testing.T) {
			ctx := context.Background()
			c, _ := redistest.NewClient(t, s)
			name := redistest.Name(t)
			m := mutex.New(c, name)
			require.NoError(t, m.Lock(ctx))
			beforeForceUnlock = func(inspect.Lock) { require.NoError(t, m.Unlock(ctx)) }
			r := relockCmd(t, "", append(flags, "-yes", "force-unlock", name)...)
			beforeForceUnlock = nil
			assert.Equal(t, 1, r.code)
			assert.Equal(t, `mutex "`+name+`" was released meanwhile: nothing deleted`+"\n", r.stdout)
			assert.Equal(t, `relock: nothing to force-unlock: no lock named "`+name+`" is held`+"\n", r.stderr)
		})
	})
}

func jsonList(a []string) string {
	b, _ := json.Marshal(a)
	return string(b)
}

// TestForceUnlockUnknownOutcome: when the force-unlock's reply does not
// come (the network drops everything once the lock was read), the command
// fails within -timeout and says that the outcome is unknown.
func TestForceUnlockUnknownOutcome(t *testing.T) {
	redistest.Exclusive(t, "it sets beforeForceUnlock, which every force-unlock of the process calls")
	t.Cleanup(func() { beforeForceUnlock = nil })
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
		p := redistest.NewProxy(t, s.Addr)
		beforeForceUnlock = func(inspect.Lock) { p.Blackhole(true) }
		r := relockCmd(t, "", "-redis", "redis://"+p.Addr, "-timeout", "300ms", "-yes", "force-unlock", name)
		beforeForceUnlock = nil
		assert.Equal(t, 1, r.code)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, `relock: force-unlock mutex "`+name+`": `)
		assert.Contains(t, r.stderr, "(whether it was deleted is unknown: inspect it)")
		assert.Less(t, r.took, 2*time.Second)
	})
}

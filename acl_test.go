package relock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// TestACLLine: the operations guide (docs/operations.md, "ACL: the rights
// relock needs") states the ACL line that the lock packages' TestACL
// suites run under (redistest.ACLRules), word for word, on a line of its
// own, and the Cluster's and the relock command's extra rules likewise.
func TestACLLine(t *testing.T) {
	redistest.Parallel(t)
	const page = "docs/operations.md"
	doc, err := os.ReadFile(filepath.FromSlash(page))
	require.NoError(t, err)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		redistest.ACLLine(redistest.ACLUser, "PASSWORD"),
		"ACL SETUSER " + redistest.ACLUser + " " + redistest.ACLOperatorRules, // the relock command's extra rules
		"ACL SETUSER " + redistest.ACLUser + " " + redistest.ACLClusterRules,  // a Cluster's extra rules
	} {
		assert.True(t, lines[want], "%s has no line\n%s", page, want)
	}
}

// TestACLRulesCoverScripts: every command a script calls is allowed by
// the ACL rules, and every command the rules allow is one that a script
// calls or that relock or go-redis sends itself (as ACLRules lists them),
// so that a new script command cannot be forgotten in the documented line
// (docs/operations.md).
func TestACLRulesCoverScripts(t *testing.T) {
	redistest.Parallel(t)
	allowed := map[string]bool{}
	for _, f := range strings.Fields(redistest.ACLRules) {
		if cmd, ok := strings.CutPrefix(f, "+"); ok {
			allowed[cmd] = true
		}
	}
	files, err := filepath.Glob(filepath.Join("internal", "scripts", "*.lua"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	call := regexp.MustCompile(`redis\.p?call\(\s*(.)`)
	named := regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z_|]+)['"]`)
	scripts := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Equal(t, len(call.FindAll(src, -1)), len(named.FindAll(src, -1)),
			"%s calls a command whose name is not a literal: check it by hand", f)
		for _, m := range named.FindAllSubmatch(src, -1) {
			scripts[strings.ToLower(string(m[1]))] = true
		}
	}
	var missing []string
	for cmd := range scripts {
		if !allowed[cmd] {
			missing = append(missing, cmd)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "commands the scripts call that the ACL rules do not allow")

	// Sent by relock or go-redis themselves (see redistest.ACLRules). A
	// Cluster's extra rules (SPUBLISH of the scripts' sharded twins, built
	// in Go; SSUBSCRIBE, SUNSUBSCRIBE; CLUSTER SLOTS) are ACLClusterRules,
	// which the lock packages' TestACL/cluster checks against the ACL LOG
	// of every node.
	direct := map[string]bool{"evalsha": true, "eval": true, "fcall": true, "function|load": true, "set": true, "get": true, "exists": true,
		"pttl": true, "hget": true, "wait": true, "subscribe": true, "unsubscribe": true, "ping": true,
		"client|setname": true, "select": true,
		// The snapshot scripts of internal/inspect (the handles' Holders),
		// written in Go.
		"hgetall": true}
	var extra []string
	for cmd := range allowed {
		if !scripts[cmd] && !direct[cmd] {
			extra = append(extra, cmd)
		}
	}
	sort.Strings(extra)
	assert.Empty(t, extra, "commands the ACL rules allow that relock never sends")
}

// TestACLConnection: the restricted user may do what go-redis does on a
// connection that the lock suites do not show: SELECT (Options.DB > 0),
// and PING on a pub/sub connection (relock's health check after 15 s of
// silence; a refusal would turn off pushed wake-ups).
func TestACLConnection(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunACL(t, func(t *testing.T) {
		redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rdb := s.Client(t, func(o *redis.Options) { o.DB = 1 })
			c := relock.New(rdb)
			t.Cleanup(func() { _ = c.Close() })
			name := redistest.Name(t)
			m := mutex.New(c, name)
			require.NoError(t, m.Lock(ctx))
			key := "relock:mutex:{" + name + "}"
			assert.Equal(t, int64(1), rdb.Exists(ctx, key).Val(), "the lock is not in database 1")
			assert.Zero(t, s.Admin(t).Exists(ctx, key).Val(), "the lock is in database 0")
			require.NoError(t, m.Unlock(ctx))

			ps := s.Client(t).Subscribe(ctx, "relock:mutex:{"+name+"}")
			defer ps.Close()
			_, err := ps.ReceiveTimeout(ctx, 5*time.Second) // the subscription's confirmation
			require.NoError(t, err)
			require.NoError(t, ps.Ping(ctx))
			msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
			require.NoError(t, err)
			assert.IsType(t, &redis.Pong{}, msg, "the reply to PING on a pub/sub connection")
		})
	})
}

// refusal is how Redis refuses a command to a user: NOPERM, or inside a
// script "ERR The user executing the script can't run this command".
var refusal = regexp.MustCompile(`^[a-z]+: [a-z-]+ ".*": (NOPERM |ERR The user executing the script can't run this command)`)

// lockType is one lock type as TestACLWithoutRights drives it: lock and
// try-lock (one unit), and unlock.
type lockType struct {
	kind string
	new  func(c *relock.Client, name string) (lock func(context.Context) error, try func(context.Context) (bool, error), unlock func(context.Context) error)
}

var lockTypes = []lockType{
	{"mutex", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := mutex.New(c, name)
		return l.Lock, l.TryLock, l.Unlock
	}},
	{"reentrant", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := reentrant.New(c, name)
		return l.Lock, l.TryLock, l.Unlock
	}},
	{"fair", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := fair.New(c, name)
		return l.Lock, l.TryLock, l.Unlock
	}},
	{"rwlock", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := rwlock.New(c, name)
		return l.Lock, l.TryLock, l.Unlock
	}},
	{"rwlock.read", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := rwlock.New(c, name)
		return l.RLock, l.TryRLock, l.RUnlock
	}},
	{"semaphore", func(c *relock.Client, name string) (func(context.Context) error, func(context.Context) (bool, error), func(context.Context) error) {
		l := semaphore.New(c, name, 1)
		return func(ctx context.Context) error { return l.Acquire(ctx, 1) },
			func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) },
			func(ctx context.Context) error { return l.Release(ctx, 1) }
	}},
}

// TestACLWithoutRights: for a Redis user that lacks some of the documented
// rights, every lock type's Lock, TryLock and Unlock return Redis's NOPERM
// error, wrapped with the lock type and name, at once (well within 2 s of
// a Lock whose ctx would allow 20 s): on a free lock, and on one held by
// another Client (so the Lock would otherwise wait). The one exception is
// the mutex's first attempt, a native SET NX: where SET is allowed it may
// take a free mutex, and then its Unlock (a script) fails. An election's
// Campaign and Leader, and a latch's calls, are refused likewise.
func TestACLWithoutRights(t *testing.T) {
	redistest.Parallel(t)
	const bound = 2 * time.Second
	// free: the lock types whose uncontended Lock and Unlock need none of
	// the rights lacking (a mutex's first attempt is a SET NX; without
	// anyone holding or queued, no script reads the clock).
	lacks := []struct {
		name, rules string
		free        []string
	}{
		{"no-keys", strings.Replace(redistest.ACLRules, " ~relock:* ", " ", 1), []string{"mutex"}},
		{"no-scripts", strings.Replace(redistest.ACLRules, " +evalsha +eval +fcall +function|load ", " ", 1), []string{"mutex"}},
		{"no-time", strings.Replace(redistest.ACLRules, " +time", "", 1), []string{"mutex", "reentrant", "fair", "rwlock", "rwlock.read", "semaphore"}}, // called only inside scripts
	}
	for _, lack := range lacks {
		require.NotEqual(t, redistest.ACLRules, lack.rules, lack.name)
		t.Run(lack.name, func(t *testing.T) {
			redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
				u := redistest.NewUser(t, s, lack.rules)
				c := relock.New(u.Client(t))
				t.Cleanup(func() { _ = c.Close() })
				admin, _ := redistest.NewClient(t, s)
				for _, lt := range lockTypes {
					t.Run(lt.kind, func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 10*bound)
						defer cancel()
						name := redistest.Name(t)
						lock, _, unlock := lt.new(c, name)
						refused := func(what string, start time.Time, err error) {
							t.Helper()
							t.Logf("%s: %v (%v)", what, err, time.Since(start))
							assert.Less(t, time.Since(start), bound, what)
							require.Error(t, err, what)
							assert.Regexp(t, refusal, err.Error(), what)
							assert.True(t, strings.HasPrefix(err.Error(), strings.Split(lt.kind, ".")[0]+": "), "%s: %v", what, err)
							assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "%s: %v", what, err)
							assert.NotErrorIs(t, err, relock.ErrNotObtained, what)
						}

						// A free lock.
						start := time.Now()
						if err := lock(ctx); err != nil {
							refused("Lock of a free lock", start, err)
							assert.ErrorIs(t, unlock(ctx), relock.ErrNotHeld, "Unlock after a refused Lock")
						} else {
							require.Contains(t, lack.free, lt.kind, "a lock taken without the rights its scripts need")
							start = time.Now()
							if err := unlock(ctx); err != nil {
								refused("Unlock of a free lock taken", start, err)
								require.NoError(t, s.Admin(t).Del(ctx, "relock:"+lt.kind+":{"+name+"}").Err())
							}
						}

						// Held by another Client: a Lock that would wait.
						holdLock, _, holdUnlock := lt.new(admin, name)
						require.NoError(t, holdLock(ctx))
						defer func() { require.NoError(t, holdUnlock(ctx)) }()
						lock, try, _ := lt.new(c, name)
						start = time.Now()
						refused("Lock of a held lock", start, lock(ctx))
						start = time.Now()
						ok, err := try(ctx)
						if err != nil {
							refused("TryLock of a held lock", start, err)
						} else {
							require.Equal(t, "mutex", lt.kind, "a TryLock that asked Redis without the rights its scripts need")
						}
						assert.False(t, ok)
					})
				}
				t.Run("election", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*bound)
					defer cancel()
					name := redistest.Name(t)
					check := func(what string, start time.Time, err error) {
						t.Helper()
						t.Logf("%s: %v (%v)", what, err, time.Since(start))
						assert.Less(t, time.Since(start), bound, what)
						require.Error(t, err, what)
						assert.Regexp(t, refusal, err.Error(), what)
						assert.True(t, strings.HasPrefix(err.Error(), "election: "), "%s: %v", what, err)
						assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "%s: %v", what, err)
						assert.NotErrorIs(t, err, relock.ErrNotObtained, what)
					}
					e := election.New(c, name)
					start := time.Now()
					check("Campaign of a free election", start, e.Campaign(ctx, "v"))
					assert.ErrorIs(t, e.Resign(ctx), election.ErrNotLeader, "Resign after a refused Campaign")
					start = time.Now()
					_, err := e.Leader(ctx)
					check("Leader", start, err)

					// Led by another Client: a Campaign that would wait.
					leader := election.New(admin, name)
					require.NoError(t, leader.Campaign(ctx, "l"))
					defer func() { require.NoError(t, leader.Resign(ctx)) }()
					start = time.Now()
					check("Campaign of a led election", start, election.New(c, name).Campaign(ctx, "v"))
				})
				t.Run("latch", func(t *testing.T) {
					if lack.name == "no-time" {
						t.Skip("the latch's scripts do not call TIME")
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*bound)
					defer cancel()
					name := redistest.Name(t)
					l := latch.New(c, name)
					check := func(what string, start time.Time, err error) {
						t.Helper()
						assert.Less(t, time.Since(start), bound, what)
						require.Error(t, err, what)
						assert.Regexp(t, refusal, err.Error(), what)
						assert.True(t, strings.HasPrefix(err.Error(), "latch: "), "%s: %v", what, err)
						assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "%s: %v", what, err)
					}
					start := time.Now()
					_, err := l.TrySetCount(ctx, 1)
					check("TrySetCount", start, err)
					start = time.Now()
					check("CountDown", start, l.CountDown(ctx))
					if lack.name == "no-keys" {
						start = time.Now()
						check("Wait", start, l.Wait(ctx)) // GET
					}
				})
			})
		})
	}
}

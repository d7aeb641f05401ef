package relock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/rwlock"
)

// TestFunctions: on a real server relock's scripts run as functions
// (FCALL), and a server that lost them (FUNCTION FLUSH, as a restart
// without persistence does) gets the library again on the next call, the
// watchdog's renewals included: holds survive, calls succeed. It flushes
// its server's functions and counts its FCALLs: the server is its own.
func TestFunctions(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		admin := s.Admin(t)
		// Leases of 1.5 s: 600 ms ran out once in CI33 (a renewal round
		// that reloaded the library, on a loaded machine).
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(1500*time.Millisecond))
		name := redistest.Name(t)
		m, rw := mutex.New(c, name), rwlock.New(c, name)
		before := redistest.CommandCalls(t, admin, "fcall")
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
		assert.Greater(t, redistest.CommandCalls(t, admin, "fcall"), before, "the release ran as a function")

		require.NoError(t, rw.Lock(ctx))
		require.NoError(t, admin.FunctionFlush(ctx).Err())
		// Longer than a lease: the hold survives only if renewals (every
		// 500 ms) found the library gone, and loaded it.
		time.Sleep(1700 * time.Millisecond)
		require.NoError(t, rw.LostErr(), "a hold was lost when its server lost the functions")
		require.NoError(t, admin.FunctionFlush(ctx).Err())
		require.NoError(t, rw.Unlock(ctx), "a release after FUNCTION FLUSH")
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, admin.FunctionFlush(ctx).Err())
		require.NoError(t, m.Unlock(ctx))
	})
}

// TestFunctionsRefused: an ACL user without +fcall and +function|load (the
// documented rules before relock used functions) still gets every call done,
// as scripts: a refusal of FCALL turns functions off for the Client, and no
// FCALL follows. (Calls already on their way when the first refusal comes
// back are refused too: a renewal beside the Unlock, on a loaded machine.)
// It reads its server's ACL LOG, which the ACL tests beside it fill (and
// reset, when they fail), and whose oldest entries a full log drops: the
// server is its own.
func TestFunctionsRefused(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunOwn(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rules := strings.Replace(redistest.ACLRules, " +fcall +function|load ", " ", 1)
		require.NotEqual(t, redistest.ACLRules, rules)
		u := redistest.NewUser(t, s, rules)
		// Leases of 1.5 s: 600 ms ran out once in CI35 (the first renewal
		// refused as FCALL, then sent as a script, on a loaded machine).
		c := relock.New(u.Client(t), relock.WithWatchdogTimeout(1500*time.Millisecond))
		t.Cleanup(func() { _ = c.Close() })
		admin := s.Admin(t)
		refused := func() int {
			log, err := admin.ACLLog(ctx, 0).Result()
			require.NoError(t, err)
			n := 0
			for _, e := range log {
				if e.Username == u.Username {
					assert.Contains(t, []string{"fcall", "function|load"}, e.Object, "refused %s", e.Object)
					n += int(e.Count)
				}
			}
			return n
		}
		m := mutex.New(c, redistest.Name(t))
		cycle := func() {
			require.NoError(t, m.Lock(ctx))
			time.Sleep(600 * time.Millisecond) // a renewal (every 500 ms)
			require.NoError(t, m.Unlock(ctx))
		}
		cycle()
		time.Sleep(600 * time.Millisecond) // a renewal sent before the first refusal came back has been answered
		first := refused()
		assert.Positive(t, first, "the release or the renewal was sent as FCALL")
		cycle()
		cycle()
		assert.Equal(t, first, refused(), "FCALL was tried again after its refusal")
	})
}

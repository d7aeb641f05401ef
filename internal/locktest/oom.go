package locktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// OutOfMemory: with Redis out of memory (maxmemory reached, noeviction),
// holds are still renewed and released, as Redis functions (FCALL) and as
// scripts (a user without +fcall): the watchdog keeps a watched hold
// (no Lost for several leases) and Unlock of a watched and of a fixed
// lease hold succeeds. New acquires may be refused meanwhile; nothing
// held may be lost for it. It sets the shared server's maxmemory, so it
// runs on a real server only, and alone.
func OutOfMemory(t *testing.T, k Kind) {
	redistest.Exclusive(t, "it sets the shared server's maxmemory")
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		s.SingleOnly(t, "maxmemory of one server")
		ctx := testCtx(t)
		admin := s.Admin(t)
		const lease = 1500 * time.Millisecond // renewed every 500 ms: room for a loaded machine
		paths := map[string]*relock.Client{}
		paths["functions"], _ = redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		u := redistest.NewUser(t, s, strings.Replace(redistest.ACLRules, " +fcall +function|load ", " ", 1))
		sc := relock.New(u.Client(t), relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = sc.Close() })
		paths["scripts"] = sc

		name := redistest.Name(t)
		watched, fixed := map[string]Handle{}, map[string]Handle{}
		for path, c := range paths {
			watched[path] = k.New(c, name+"."+path)
			fixed[path] = k.New(c, name+"."+path+".fixed", relock.WithLease(time.Minute))
			require.NoError(t, watched[path].Lock(ctx))
			require.NoError(t, fixed[path].Lock(ctx))
		}
		time.Sleep(lease / 2) // a renewal of each: the scripts are loaded

		require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
		require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
		restore := func() { _ = admin.ConfigSet(context.Background(), "maxmemory", "0").Err() }
		t.Cleanup(restore)
		for path := range paths {
			assert.NoError(t, fixed[path].Unlock(ctx), "%s: Unlock of a fixed lease while Redis is out of memory", path)
		}
		time.Sleep(2 * lease) // renewals every lease/3
		for path := range paths {
			assert.NoError(t, watched[path].LostErr(), "%s: a watched hold lost while Redis is out of memory", path)
			assert.NoError(t, watched[path].Unlock(ctx), "%s: Unlock while Redis is out of memory", path)
		}
		restore()
		assert.Eventually(t, func() bool { return len(s.Keys(t, k.Key(name+"*")+"*")) == 0 }, 2*time.Second, 20*time.Millisecond,
			"keys left: %v", s.Keys(t, k.Key(name+"*")+"*"))
	})
}

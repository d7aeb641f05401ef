package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// TestACLOperator: the command lists, inspects and force-unlocks locks of
// every type as a Redis user with the library's ACL rules and the one
// that docs/operations.md adds for the command
// (redistest.ACLOperatorRules), and Redis refuses it nothing; with the library's rules alone, list (SCAN) is
// refused, while inspect and run are refused nothing.
func TestACLOperator(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		sc := newScene(t, s)
		url := func(u *redistest.Server) string {
			return "redis://" + u.Username + ":" + u.Password + "@" + s.Addr
		}

		lib := redistest.NewUser(t, s, redistest.ACLRules)
		r := relockCmd(t, "", "-redis", url(lib), "list", sc.name)
		assert.NotEqual(t, 0, r.code, "list without the operator's rules")
		assert.Regexp(t, `NOPERM|can't run this command`, r.stderr)
		r = relockCmd(t, "", "-redis", url(lib), "inspect", sc.name)
		assert.Equal(t, 0, r.code, "inspect with the library's rules: %s", r.stderr)

		op := redistest.NewUser(t, s, redistest.ACLRules+" "+redistest.ACLOperatorRules)
		list := relockCmd(t, "", "-redis", url(op), "list", sc.name)
		require.Equal(t, 0, list.code)
		for _, kind := range []string{"mutex", "reentrant", "fair", "rwlock"} {
			assert.Contains(t, list.stdout, kind)
		}
		inspect := relockCmd(t, "", "-redis", url(op), "inspect", sc.name)
		require.Equal(t, 0, inspect.code)
		force := relockCmd(t, "", "-redis", url(op), "-yes", "force-unlock", sc.name)
		require.Equal(t, 0, force.code)
		assert.Contains(t, force.stdout, "deleted mutex")
		noTokens(t, sc, list, inspect, force)

		// run needs only the library's rules.
		runner := redistest.NewUser(t, s, redistest.ACLRules)
		for _, n := range []string{"1", "2"} {
			r := relockProc(t, append([]string{"-redis", url(runner), "run", "-n", n, sc.name + ".run", "--"}, childArgs(t, "env")...)...)
			assert.Equal(t, 0, r.code, "run -n %s", n)
		}

		log, err := s.Admin(t).ACLLog(context.Background(), 0).Result()
		require.NoError(t, err)
		for _, e := range log {
			assert.NotEqual(t, op.Username, e.Username, "Redis refused the operator %s %q", e.Reason, e.Object)
			assert.NotEqual(t, runner.Username, e.Username, "Redis refused run %s %q", e.Reason, e.Object)
		}
	})
}

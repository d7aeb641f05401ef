package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
)

// An election is shown with its leader, term and candidates, with their
// values; force-unlock ends the leadership, and the next candidate leads.
func TestElection(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(2*time.Second))
		name := redistest.Name(t)
		queue := core.NewKeys("election", name).Queue
		fp := core.Fingerprint
		queued := func(n int) {
			t.Helper()
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, queue).Val() == int64(n) },
				5*time.Second, 2*time.Millisecond, "%d candidates never queued", n)
		}

		leader, next, third := election.New(c, name), election.New(c, name), election.New(c, name)
		require.NoError(t, leader.Campaign(ctx, "host-a:8080"))
		cctx, cancel := context.WithCancel(ctx)
		campaigned := make(chan error, 1)
		go func() { campaigned <- next.Campaign(cctx, "host-b:8080") }()
		t.Cleanup(func() {
			cancel()
			<-campaigned
			_ = next.Resign(ctx)
		})
		queued(1)
		long := strings.Repeat("x", 100) // shown cut in tables, whole in JSON
		background(t, func(ctx context.Context) error { return third.Campaign(ctx, long) })
		queued(2)
		tokens := []string{leader.Token(), next.Token(), third.Token()}
		noTokens := func(outs ...result) {
			t.Helper()
			for _, o := range outs {
				for _, tok := range tokens {
					require.NotContains(t, o.stdout+o.stderr, tok, "an owner token was shown")
				}
			}
		}

		text := relockCmd(t, "", "-redis", redisURL(s), "inspect", name)
		require.Equal(t, 0, text.code)
		assert.Regexp(t, `(?m)^election "`+regexp.QuoteMeta(name)+`": held, ttl [0-9.]+m?s, term 1$`, text.stdout)
		assert.Regexp(t, `(?m)^  LEADER +VALUE$`, text.stdout)
		assert.Regexp(t, `(?m)^  `+fp(leader.Token())+` +host-a:8080$`, text.stdout)
		assert.Regexp(t, `(?m)^  QUEUE +CANDIDATE +ALIVE +VALUE$`, text.stdout)
		assert.Regexp(t, `(?m)^  1 +`+fp(next.Token())+` +[0-9.]+m?s +host-b:8080$`, text.stdout)
		assert.Regexp(t, `(?m)^  2 +`+fp(third.Token())+` +[0-9.]+m?s +x{37}\.\.\.$`, text.stdout)

		js := relockCmd(t, "", "-redis", redisURL(s), "-json", "inspect", name)
		require.Equal(t, 0, js.code)
		_, locks := jsonLines(t, js.stdout)
		require.Len(t, locks, 1)
		l := locks[0]
		assert.Equal(t, "election", l.Kind)
		assert.True(t, l.Held)
		assert.Greater(t, l.TTLMs, int64(0))
		assert.Equal(t, []jsonOwner{{Owner: fp(leader.Token()), Count: 1, Metadata: "host-a:8080"}}, l.Owners)
		require.NotNil(t, l.Fence)
		assert.Equal(t, int64(1), *l.Fence, "term")
		require.NotNil(t, l.Queue)
		require.Len(t, *l.Queue, 2)
		for i, want := range []struct{ owner, value string }{{fp(next.Token()), "host-b:8080"}, {fp(third.Token()), long}} {
			w := (*l.Queue)[i]
			assert.Equal(t, want.owner, w.Owner, "candidate %d", i+1)
			assert.Equal(t, want.value, w.Metadata, "candidate %d", i+1)
			assert.Greater(t, w.AliveMs, int64(0), "candidate %d", i+1)
		}

		list := relockCmd(t, "", "-redis", redisURL(s), "list", name)
		require.Equal(t, 0, list.code)
		assert.Regexp(t, `(?m)^election +`+regexp.QuoteMeta(name)+` +held +`+fp(leader.Token())+` \(host-a:8080\) +[0-9.]+m?s +2$`,
			list.stdout)

		// force-unlock ends the leadership: the head of the queue leads,
		// and the former leader learns it at its next renewal.
		force := relockCmd(t, "", "-redis", redisURL(s), "-yes", "force-unlock", name)
		require.Equal(t, 0, force.code)
		select {
		case err := <-campaigned:
			require.NoError(t, err)
			campaigned <- nil // for the cleanup
		case <-time.After(5 * time.Second):
			t.Fatal("the next candidate was not made leader")
		}
		select {
		case <-leader.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("the former leader did not learn that it lost the leadership")
		}
		require.ErrorIs(t, leader.LostErr(), relock.ErrLockGone)
		assert.Equal(t, int64(2), next.Term())

		after := relockCmd(t, "", "-redis", redisURL(s), "inspect", name)
		require.Equal(t, 0, after.code)
		assert.Regexp(t, `(?m)^election .*, term 2$`, after.stdout)
		assert.Regexp(t, `(?m)^  `+fp(next.Token())+` +host-b:8080$`, after.stdout)
		assert.Regexp(t, `(?m)^  1 +`+fp(third.Token())+` `, after.stdout)
		noTokens(text, js, list, force, after)
	})
}

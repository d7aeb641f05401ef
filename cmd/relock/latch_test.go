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
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/semaphore"
)

// TestSemaphoreAndLatch: list and inspect show a semaphore (held, by its
// holder, with its permits) and a latch, which nobody holds: its state is
// its count, in list's table and in inspect's header, and follows a
// count-down; -json gives the count as a number.
func TestSemaphoreAndLatch(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, rdb := redistest.NewClient(t, s)
		name := redistest.Name(t)
		sem := semaphore.New(c, name, 3)
		require.NoError(t, sem.Acquire(ctx, 2))
		t.Cleanup(func() { _ = sem.Release(ctx, 2) })
		var holders []string
		for _, f := range rdb.HKeys(ctx, core.NewKeys("semaphore", name).Lock).Val() {
			if f != "permits" && f != "used" {
				holders = append(holders, f)
			}
		}
		holder := only(t, holders)
		l := latch.New(c, name, relock.WithLease(30*time.Second))
		ok, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		t.Cleanup(func() { _ = l.CountDown(ctx); _ = l.CountDown(ctx) })

		q := regexp.QuoteMeta(name)
		list := func() []string {
			t.Helper()
			r := relockCmd(t, "", "-redis", redisURL(s), "list", name)
			require.Equal(t, 0, r.code)
			assert.NotContains(t, r.stdout, holder, "an owner token was shown")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			require.Len(t, lines, 3, "a header and one row per lock")
			return lines
		}
		lines := list()
		assert.Regexp(t, `^semaphore +`+q+` +held +[0-9a-f]{8} x2 +[0-9.]+m?s +0$`, lines[1])
		assert.Regexp(t, `^latch +`+q+` +count 2 +- +[0-9.]+m?s +-$`, lines[2])

		r := relockCmd(t, "", "-redis", redisURL(s), "inspect", name)
		require.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, `semaphore "`+name+`": held, ttl `)
		assert.Contains(t, r.stdout, ", 2 of 3 permits used")
		assert.Regexp(t, `(?m)^latch "`+q+`": count 2, ttl [0-9.]+m?s$`, r.stdout)

		require.NoError(t, l.CountDown(ctx))
		lines = list()
		assert.Regexp(t, `^latch +`+q+` +count 1 +- +[0-9.]+m?s +-$`, lines[2])

		// A count of 0 (relock deletes the key instead; one written by
		// hand): open.
		require.NoError(t, rdb.Set(ctx, core.NewKeys("latch", name+".0").Lock, "0", time.Minute).Err())
		r = relockCmd(t, "", "-redis", redisURL(s), "list", name+".0")
		require.Equal(t, 0, r.code)
		assert.Regexp(t, `(?m)^latch +`+q+`\.0 +open +- +- +-$`, r.stdout)

		js := relockCmd(t, "", "-redis", redisURL(s), "-json", "inspect", name)
		require.Equal(t, 0, js.code)
		_, locks := jsonLines(t, js.stdout)
		require.Len(t, locks, 2)
		assert.Equal(t, "latch", locks[1].Kind)
		require.NotNil(t, locks[1].Count)
		assert.Equal(t, 1, *locks[1].Count)
	})
}

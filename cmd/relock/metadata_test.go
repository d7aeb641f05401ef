package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/semaphore"
)

// TestMetadata: inspect, list and their -json show the metadata the
// holders gave (relock.WithMetadata); inspect adds its column only then.
func TestMetadata(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		m := mutex.New(c, name, relock.WithMetadata("web-3 pid 4711"))
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
		sem := semaphore.New(c, name, 3, relock.WithMetadata("worker-b"))
		require.NoError(t, sem.Acquire(ctx, 2))
		t.Cleanup(func() { _ = sem.Release(ctx, 2) })

		// Waiters with metadata, queued behind them.
		wctx, cancel := context.WithCancel(ctx)
		var waiting sync.WaitGroup
		mw := mutex.New(c, name, relock.WithMetadata("queued-a"))
		sw := semaphore.New(c, name, 3, relock.WithMetadata("queued-b"))
		waiting.Add(2)
		go func() { defer waiting.Done(); _ = mw.Lock(wctx) }()
		go func() { defer waiting.Done(); _ = sw.Acquire(wctx, 2) }()
		t.Cleanup(func() { cancel(); waiting.Wait() })
		rdb := s.Client(t)
		require.Eventually(t, func() bool {
			return rdb.ZCard(ctx, "relock:mutex:{"+name+"}:queue").Val() == 1 &&
				rdb.ZCard(ctx, "relock:semaphore:{"+name+"}:queue").Val() == 1
		}, 5*time.Second, 5*time.Millisecond, "the waiters never queued")

		text := relockCmd(t, "", "-redis", redisURL(s), "inspect", name)
		require.Equal(t, 0, text.code, text.stderr)
		assert.Regexp(t, `(?m)^  OWNER +HOLDS +METADATA$`, text.stdout)
		assert.Regexp(t, `(?m)^  `+m.Fingerprint()+` +1 +"web-3 pid 4711"$`, text.stdout)
		assert.Regexp(t, `(?m)^  `+sem.Fingerprint()+` +2 +\S+ +worker-b$`, text.stdout)
		assert.Regexp(t, `(?m)^  QUEUE +WAITER +ALIVE +METADATA$`, text.stdout)
		assert.Regexp(t, `(?m)^  1 +`+mw.Fingerprint()+` +\S+ +queued-a$`, text.stdout)
		assert.Regexp(t, `(?m)^  QUEUE +WAITER +WANTS +ALIVE +METADATA$`, text.stdout)
		assert.Regexp(t, `(?m)^  1 +`+sw.Fingerprint()+` +2 +\S+ +queued-b$`, text.stdout)

		list := relockCmd(t, "", "-redis", redisURL(s), "list", name)
		require.Equal(t, 0, list.code, list.stderr)
		assert.Contains(t, list.stdout, m.Fingerprint()+` ("web-3 pid 4711")`)

		js := relockCmd(t, "", "-redis", redisURL(s), "-json", "inspect", name)
		require.Equal(t, 0, js.code, js.stderr)
		var got []string
		_, locks := jsonLines(t, js.stdout)
		for _, l := range locks {
			for _, o := range l.Owners {
				got = append(got, o.Metadata)
			}
		}
		assert.ElementsMatch(t, []string{"web-3 pid 4711", "worker-b"}, got)
	})
}

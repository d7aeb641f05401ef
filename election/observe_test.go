package election_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/internal/redistest"
)

// collector reads an Observe channel until it closes.
type collector struct {
	mu   sync.Mutex
	got  []election.Leader
	done chan struct{}
}

func collect(ch <-chan election.Leader) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for l := range ch {
			c.mu.Lock()
			c.got = append(c.got, l)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) all() []election.Leader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]election.Leader(nil), c.got...)
}

// waitFor waits until the collector has n reports.
func (c *collector) waitFor(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(c.all()) < n {
		if time.Now().After(deadline) {
			got := c.all() // what it reported by the deadline, not at the start
			require.Failf(t, "too few reports", "the observer reported %d states, not %d: %s", len(got), n, show(got))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// show writes reports as "V", "3:a", "3.1:a1" (term.rev:value).
func show(ls []election.Leader) string {
	var out []string
	for _, l := range ls {
		out = append(out, short(l))
	}
	return strings.Join(out, " ")
}

func short(l election.Leader) string {
	switch {
	case l.Vacant():
		return "V"
	case l.Rev > 0:
		return fmt.Sprintf("%d.%d:%s", l.Term, l.Rev, l.Value)
	}
	return fmt.Sprintf("%d:%s", l.Term, l.Value)
}

// TestObserveEveryChange: observers see the state when they start, then
// every new leader, every Proclaim and every vacancy, in order, each once:
// hand-overs (no vacancy between), a resignation with nobody waiting, a
// leadership whose lease ran out with no script to say so (found by the
// observer's timer), and the vacancy that the next campaign then logs
// (reported once). An observer whose receiver reads nothing until the end
// sees the same, and so does a third one on another Client.
func TestObserveEveryChange(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := testCtx(t)
		c, c2 := newClient(t, s), newClient(t, s)
		name := redistest.Name(t)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		obs := election.New(c, name)
		live := collect(obs.Observe(octx))
		slow := obs.Observe(octx) // read at the start and at the end only
		other := collect(election.New(c2, name).Observe(octx))
		live.waitFor(t, 1, 5*time.Second)
		other.waitFor(t, 1, 5*time.Second)
		slowGot := []election.Leader{<-slow} // then nothing until the end

		a, b, cc := election.New(c, name, hb), election.New(c2, name, hb), election.New(c, name, hb)
		require.NoError(t, a.Campaign(ctx, "a"))
		require.NoError(t, a.Proclaim(ctx, "a1"))
		require.NoError(t, a.Proclaim(ctx, "a2"))
		bDone, cDone := make(chan error, 1), make(chan error, 1)
		go func() { bDone <- b.Campaign(ctx, "b") }()
		waitQueued(t, s, name, 1)
		go func() { cDone <- cc.Campaign(ctx, "c") }()
		waitQueued(t, s, name, 2)
		require.NoError(t, a.Resign(ctx))
		require.NoError(t, <-bDone)
		require.NoError(t, b.Resign(ctx))
		require.NoError(t, <-cDone)
		require.NoError(t, cc.Resign(ctx))

		// A leadership that just runs out.
		const short = 300 * time.Millisecond
		d := election.New(c2, name, relock.WithLease(short), hb)
		require.NoError(t, d.Campaign(ctx, "d"))
		ran := time.Now()
		live.waitFor(t, 9, short+3*time.Second)
		t.Logf("the unannounced vacancy was reported %v after the campaign (lease %v)", time.Since(ran), short)
		e := election.New(c, name, hb)
		require.NoError(t, e.Campaign(ctx, "e"))
		require.NoError(t, e.Resign(ctx))

		live.waitFor(t, 11, 5*time.Second)
		other.waitFor(t, 11, 5*time.Second)
		for len(slowGot) < 11 {
			select {
			case l := <-slow:
				slowGot = append(slowGot, l)
			case <-time.After(5 * time.Second):
				t.Fatalf("the slow observer stopped at %s", show(slowGot))
			}
		}
		time.Sleep(100 * time.Millisecond) // nothing more comes
		stop()
		<-live.done
		<-other.done

		got := live.all()
		require.Len(t, got, 11, show(got))
		t1 := got[1].Term
		want := fmt.Sprintf("V %d:a %d.1:a1 %d.2:a2 %d:b %d:c V %d:d V %d:e V", t1, t1, t1, t1+1, t1+2, t1+3, t1+4)
		assert.Equal(t, want, show(got))
		assert.Equal(t, want, show(other.all()), "the observer on another Client")
		assert.Equal(t, want, show(slowGot), "the observer whose receiver was slow")
		assert.Equal(t, a.Fingerprint(), got[1].Fingerprint)
		assert.Equal(t, b.Fingerprint(), got[4].Fingerprint)
		assert.Equal(t, got[1].Since, got[3].Since, "a Proclaim moved Since")
		for i := 1; i < len(got); i++ {
			assert.False(t, got[i].Since.Before(got[i-1].Since), "Since went back: %v then %v", got[i-1], got[i])
		}
	})
}

// TestObserveBacklog: a receiver that does not read while many changes
// happen gets all of them, in order, once it reads. The changes are
// three times what the log keeps, so they reach the receiver only if the
// observer goes on reading while nobody takes its reports (Backlog).
// They are made in blocks of half the log, each once the observer has
// read the one before: the log keeps an observer's changes while it is
// at most 100 behind (see Observe), and in a process as loaded as CI's
// an observer fell that far behind 300 changes made back to back (CI60:
// it read at Rev 198, then after Rev 300, and lost two).
func TestObserveBacklog(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		oc, ordb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		seen := &readRevs{}
		redistest.AddHook(ordb, seen)
		ch := election.New(oc, name, hb).Observe(octx)
		first := <-ch
		require.True(t, first.Vacant())
		e := election.New(newClient(t, s), name, hb)
		require.NoError(t, e.Campaign(ctx, "v0"))
		const n, block = 300, 50
		for i := 1; i <= n; i++ {
			require.NoError(t, e.Proclaim(ctx, fmt.Sprint("v", i)))
			if i%block == 0 {
				seen.waitFor(t, int64(i))
			}
		}
		for i := 0; i <= n; i++ {
			select {
			case l := <-ch:
				require.Equal(t, fmt.Sprint("v", i), l.Value)
				require.Equal(t, int64(i), l.Rev)
			case <-time.After(5 * time.Second):
				t.Fatalf("change %d never came", i)
			}
		}
		require.NoError(t, e.Resign(ctx))
		l := <-ch
		assert.True(t, l.Vacant())
	})
}

// readRevs is a go-redis hook on an observer's own client: it keeps the
// highest leader's Rev that the observer's reads returned. A read's reply
// holds the changes logged before it, so once it returned Rev r, the
// observer has every change up to r.
type readRevs struct{ max atomic.Int64 }

// waitFor waits until a read returned Rev rev or later.
func (h *readRevs) waitFor(t *testing.T, rev int64) {
	t.Helper()
	require.Eventually(t, func() bool { return h.max.Load() >= rev }, 5*time.Second, time.Millisecond,
		"the observer never read Rev %d (read up to %d)", rev, h.max.Load())
}

func (h *readRevs) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *readRevs) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if rev, ok := readRev(cmd); ok && err == nil && rev > h.max.Load() {
			h.max.Store(rev) // one reader: the observer
		}
		return err
	}
}

// readRev returns the leader's Rev in cmd's reply if cmd is an observer's
// read: {us, last, pttl, {term, rev, since, fp, value}, entries}.
func readRev(cmd redis.Cmder) (int64, bool) {
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return 0, false
	}
	res, ok := c.Val().([]any)
	if !ok || len(res) != 5 {
		return 0, false
	}
	ld, ok := res[3].([]any)
	if !ok || len(ld) != 5 {
		return 0, false
	}
	s, ok := ld[1].(string)
	if !ok {
		return 0, false
	}
	rev, err := strconv.ParseInt(s, 10, 64)
	return rev, err == nil
}

func (h *readRevs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestObserveDeadLeader: a leader whose Client stops renewing (its process
// died, in effect) is replaced by the waiting candidate within about one
// lease, and observers see it lead, the vacancy, and the next leader.
func TestObserveDeadLeader(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		obs := collect(election.New(newClient(t, s), name).Observe(ctx))
		obs.waitFor(t, 1, 5*time.Second)

		dead := relock.New(s.Client(t), relock.WithWatchdogTimeout(lease))
		l := election.New(dead, name, hb)
		require.NoError(t, l.Campaign(ctx, "dead"))
		next := election.New(newClient(t, s), name, hb)
		done := queued(t, ctx, s, name, next, "next")
		died := time.Now()
		require.NoError(t, dead.Close()) // no more renewals; nothing released
		require.NoError(t, outcome(t, done, lease+3*time.Second, "the dead leader was not replaced"))
		took := time.Since(died)
		t.Logf("replaced %v after the leader died (lease %v)", took, lease)
		assert.Less(t, took, lease+time.Second, "replaced after more than a lease and a heartbeat's quarter")
		obs.waitFor(t, 4, 2*time.Second)
		got := obs.all()
		assert.Equal(t, fmt.Sprintf("V %d:dead V %d:next", got[1].Term, got[1].Term+1), show(got))
		require.NoError(t, next.Resign(ctx))
	})
}

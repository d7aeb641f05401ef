package election_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(runWorker(spec)) // a worker process of TestOneLeaderAcrossProcesses
	}
	os.Exit(redistest.MainCluster(m))
}

// lease is the watchdog timeout of the tests' clients: short, so request
// records and the log (kept at most one lease) are gone soon after a test.
const lease = time.Second

func newClient(t *testing.T, s *redistest.Server, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, _ := redistest.NewClient(t, s, append([]relock.Option{relock.WithWatchdogTimeout(lease)}, opts...)...)
	return c
}

// hb is the heartbeat of the tests' candidates that check what is left:
// the queue and the log live at most a lease or a heartbeat.
var hb = relock.WithHeartbeat(lease)

func base(name string) string { return "relock:election:{" + name + "}" }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// assertOnlyCounter checks that, once leaders and candidates are gone,
// nothing of the election is left within d but its term counter (and the
// records of ForceResign calls, kept 15 s).
func assertOnlyCounter(t *testing.T, s *redistest.Server, name string, d time.Duration) {
	t.Helper()
	ok := assert.Eventually(t, func() bool {
		// Not s.Keys: this runs in a goroutine that may outlive t.
		keys, err := s.ScanKeys(base(name) + "*")
		if err != nil {
			return false
		}
		for _, k := range keys {
			if k != base(name)+":fence" && !strings.HasPrefix(k, base(name)+":f:") {
				return false
			}
		}
		return true
	}, d+2*time.Second, 20*time.Millisecond)
	if !ok {
		rdb := s.Client(t)
		for _, k := range s.Keys(t, base(name)+"*") {
			t.Logf("left: %s (TTL %v)", k, rdb.PTTL(context.Background(), k).Val())
		}
	}
}

// waitQueued waits until the election's queue holds n candidates.
func waitQueued(t *testing.T, s *redistest.Server, name string, n int) {
	t.Helper()
	rdb := s.Client(t)
	require.Eventually(t, func() bool {
		return rdb.ZCard(context.Background(), base(name)+":queue").Val() == int64(n)
	}, 5*time.Second, 2*time.Millisecond, "the queue never reached %d candidates", n)
}

// queued starts e's Campaign for value behind a leader, and returns once
// it waits in the queue (the only candidate there); the Campaign's error
// comes on the channel (see outcome).
func queued(t *testing.T, ctx context.Context, s *redistest.Server, name string, e *election.Election, value string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.Campaign(ctx, value) }()
	waitQueued(t, s, name, 1)
	return done
}

// outcome returns the error of a Campaign started by queued, and fails t
// with what if it has not returned within d.
func outcome(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatal(what)
		return nil
	}
}

func TestCampaignLeaderResign(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		e := election.New(c, name, hb)
		_, err := e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
		assert.False(t, e.Leading())
		assert.Nil(t, e.Lost())

		before := time.Now()
		require.NoError(t, e.Campaign(ctx, "host-a:8080"))
		assert.True(t, e.Leading())
		term := e.Term()
		assert.Positive(t, term)

		other := election.New(c, name)
		l, err := other.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "host-a:8080", l.Value)
		assert.Equal(t, term, l.Term)
		assert.Zero(t, l.Rev)
		assert.Equal(t, e.Fingerprint(), l.Fingerprint)
		assert.False(t, l.Vacant())
		assert.WithinDuration(t, before, l.Since, 2*time.Second, "Since is the server's time of the election")

		require.NoError(t, e.Resign(ctx))
		assert.False(t, e.Leading())
		assert.Zero(t, e.Term())
		_, err = other.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
		assert.Contains(t, err.Error(), `election: leader "`+name+`"`)
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

func TestTermsIncrease(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		clients := []*relock.Client{newClient(t, s), newClient(t, s)}
		name := redistest.Name(t)
		var last int64
		for i := 0; i < 10; i++ {
			e := election.New(clients[i%2], name)
			require.NoError(t, e.Campaign(ctx, "v"))
			require.Greater(t, e.Term(), last, "term %d after %d", e.Term(), last)
			last = e.Term()
			require.NoError(t, e.Resign(ctx))
		}
	})
}

// TestTermsAcrossRestart: a term issued after Redis restarted from its
// append-only file is greater than every term issued before.
func TestTermsAcrossRestart(t *testing.T) {
	redistest.Parallel(t)
	m := redistest.StartManaged(t, "", "--appendonly", "yes", "--appendfsync", "always")
	ctx := testCtx(t)
	c := newClient(t, &m.Server)
	name := redistest.Name(t)
	var last int64
	for i := 0; i < 3; i++ {
		e := election.New(c, name)
		require.NoError(t, e.Campaign(ctx, "v"))
		last = e.Term()
		require.NoError(t, e.Resign(ctx))
	}
	require.NoError(t, m.Restart(false))
	e := election.New(c, name)
	require.NoError(t, e.Campaign(ctx, "v"))
	assert.Greater(t, e.Term(), last)
	require.NoError(t, e.Resign(ctx))
}

// runInOrder starts one candidate per handle, each after the previous one
// joined the queue, resigns the leader, and returns the order in which the
// candidates led.
func runInOrder(t *testing.T, s *redistest.Server, name string, leader *election.Election, cands []*election.Election) []int {
	t.Helper()
	ctx := testCtx(t)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i, e := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Campaign(ctx, "c"); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			if err := e.Resign(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, s, name, i+1)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, leader.Resign(ctx))
	wg.Wait()
	return order
}

func TestFIFO(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		clients := []*relock.Client{newClient(t, s), newClient(t, s), newClient(t, s)}
		leader := election.New(clients[0], name, hb)
		require.NoError(t, leader.Campaign(testCtx(t), "first"))
		var cands []*election.Election
		want := make([]int, 12)
		for i := range want {
			cands = append(cands, election.New(clients[i%3], name, hb))
			want[i] = i
		}
		assert.Equal(t, want, runInOrder(t, s, name, leader, cands))
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestCampaignAtHead: a queued candidate that finds the leadership gone
// (ended without a script knowing) leads by its own attempt, and nothing
// of its wait is left behind: no queue entry, no deadline, no value.
func TestCampaignAtHead(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		leader := election.New(c, name, hb)
		require.NoError(t, leader.Campaign(ctx, "first"))
		next := election.New(c, name, hb)
		done := queued(t, ctx, s, name, next, "next")
		rdb := s.Client(t)
		require.Equal(t, int64(1), rdb.Del(ctx, base(name)).Val())
		require.NoError(t, outcome(t, done, 5*time.Second, "the candidate at the head never led"))
		for _, k := range []string{":queue", ":timeouts", ":values"} {
			assert.Zero(t, rdb.Exists(ctx, base(name)+k).Val(), "%s left after the head's campaign", k)
		}
		l, err := leader.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "next", l.Value)
		require.NoError(t, next.Resign(ctx))
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestCampaignCtxEnd: a candidate whose ctx ends gets an error matching
// relock.ErrNotObtained and ctx.Err(), and leaves nothing behind: no queue
// entry, no value, no subscription, no goroutine.
func TestCampaignCtxEnd(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		leader := election.New(c, name, hb)
		require.NoError(t, leader.Campaign(ctx, "l"))

		e := election.New(c, name, hb)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := e.Campaign(cctx, "c")
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, e.Leading())
		rdb := s.Client(t)
		assert.Zero(t, rdb.Exists(ctx, base(name)+":queue", base(name)+":timeouts", base(name)+":values").Val(),
			"the candidate left something in the queue")
		if s.Cluster == nil { // a Cluster's channels are sharded: SHARDNUMSUB on their node
			own, admin := base(name)+":w:"+e.Token(), s.Admin(t)
			assert.Eventually(t, func() bool { return admin.PubSubNumSub(ctx, own).Val()[own] == 0 },
				2*time.Second, 5*time.Millisecond, "the candidate's channel is still subscribed")
		}

		// A later candidate is not held up by the one that gave up.
		next := election.New(c, name, hb)
		done := queued(t, ctx, s, name, next, "n")
		require.NoError(t, leader.Resign(ctx))
		require.NoError(t, outcome(t, done, 2*time.Second, "the next candidate was not elected on the resignation"))
		require.NoError(t, next.Resign(ctx))
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestCloseWhileCampaigning: a Client closed while its candidate waits
// ends the Campaign with an error matching relock.ErrNotObtained and
// relock.ErrClosed; the candidate has left the queue, its Observe channel
// is closed, and no goroutine is left.
func TestCloseWhileCampaigning(t *testing.T) {
	redistest.Exclusive(t, "it counts the goroutines of the whole process")
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		redistest.CheckGoroutines(t)
		ctx := testCtx(t)
		name := redistest.Name(t)
		leader := election.New(newClient(t, s), name)
		require.NoError(t, leader.Campaign(ctx, "l"))

		rdb := s.Client(t)
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		e := election.New(c, name)
		changes := e.Observe(ctx)
		<-changes
		done := queued(t, ctx, s, name, e, "c")
		require.NoError(t, c.Close())
		select {
		case _, open := <-changes:
			assert.False(t, open, "Observe reported after its Client closed")
		case <-time.After(2 * time.Second):
			t.Fatal("Observe's channel did not close with its Client")
		}
		err := outcome(t, done, 5*time.Second, "Campaign did not return when its Client closed")
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, relock.ErrClosed)
		assert.Zero(t, rdb.Exists(ctx, base(name)+":queue", base(name)+":timeouts", base(name)+":values").Val(),
			"the candidate left something in the queue")
		require.NoError(t, leader.Resign(ctx))
	})
}

// TestNotLeader: Proclaim and Resign by a handle that does not lead return
// an error matching election.ErrNotLeader and relock.ErrNotHeld, and touch
// nothing of the leader's.
func TestNotLeader(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		never := election.New(c, name)
		for _, err := range []error{never.Resign(ctx), never.Proclaim(ctx, "x")} {
			require.ErrorIs(t, err, election.ErrNotLeader)
			require.ErrorIs(t, err, relock.ErrNotHeld)
		}

		leader := election.New(c, name)
		require.NoError(t, leader.Campaign(ctx, "l"))
		other := election.New(c, name)
		for _, err := range []error{other.Resign(ctx), other.Proclaim(ctx, "x")} {
			require.ErrorIs(t, err, election.ErrNotLeader)
			assert.Contains(t, err.Error(), `"`+name+`"`)
		}
		l, err := leader.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "l", l.Value, "a non-leader's Proclaim changed the value")
		assert.True(t, leader.Leading())

		require.NoError(t, leader.Resign(ctx))
		for _, err := range []error{leader.Resign(ctx), leader.Proclaim(ctx, "x")} {
			require.ErrorIs(t, err, election.ErrNotLeader, "after its Resign")
		}
		err = leader.Campaign(ctx, strings.Repeat("x", election.MaxValueLen+1))
		require.ErrorIs(t, err, relock.ErrInvalidOption)
	})
}

func TestProclaim(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		e := election.New(c, name)
		require.NoError(t, e.Campaign(ctx, "v0"))
		first, err := e.Leader(ctx)
		require.NoError(t, err)
		for i, v := range []string{"v1", "v|2", ""} {
			require.NoError(t, e.Proclaim(ctx, v))
			l, err := e.Leader(ctx)
			require.NoError(t, err)
			assert.Equal(t, v, l.Value)
			assert.Equal(t, int64(i+1), l.Rev)
			assert.Equal(t, first.Term, l.Term, "a Proclaim is no new term")
			assert.Equal(t, first.Since, l.Since, "a Proclaim does not move Since")
		}
		require.NoError(t, e.Proclaim(ctx, ""), "the same value again")
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), l.Rev, "an unchanged value counted as a change")
		require.NoError(t, e.Resign(ctx))
	})
}

func TestBadInput(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		e    *election.Election
		want error
	}{
		{"nil client", election.New(nil, "x"), relock.ErrNilClient},
		{"unusable client", election.New(relock.New(nil), "x"), relock.ErrNilClient},
		{"bad lease", election.New(nil, "x", relock.WithLease(time.Nanosecond)), relock.ErrNilClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.e.Campaign(ctx, "v"), tc.want)
			require.ErrorIs(t, tc.e.Resign(ctx), tc.want)
			require.ErrorIs(t, tc.e.Proclaim(ctx, "v"), tc.want)
			_, err := tc.e.Leader(ctx)
			require.ErrorIs(t, err, tc.want)
			_, err = tc.e.ForceResign(ctx)
			require.ErrorIs(t, err, tc.want)
			_, open := <-tc.e.Observe(ctx)
			assert.False(t, open, "Observe of an unusable handle")
			require.ErrorIs(t, tc.e.Do(ctx, "v", func(context.Context) error { return nil }), tc.want)
		})
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		c := newClient(t, s)
		for _, tc := range []struct {
			name string
			e    *election.Election
			want error
		}{
			{"empty name", election.New(c, ""), relock.ErrInvalidName},
			{"bad lease", election.New(c, "x", relock.WithLease(time.Nanosecond)), relock.ErrInvalidOption},
			{"bad heartbeat", election.New(c, "x", relock.WithHeartbeat(time.Hour*24*8)), relock.ErrInvalidOption},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.ErrorIs(t, tc.e.Campaign(ctx, "v"), tc.want)
				_, err := tc.e.Leader(ctx)
				require.ErrorIs(t, err, tc.want)
			})
		}
		e := election.New(c, redistest.Name(t))
		require.ErrorIs(t, e.Do(ctx, "v", nil), relock.ErrInvalidOption)
		require.ErrorIs(t, e.Proclaim(ctx, strings.Repeat("x", election.MaxValueLen+1)), relock.ErrInvalidOption)
	})
}

// TestCampaignWhileLeading: a Campaign of the leading handle fails at
// once with relock.ErrAlreadyHeld (a leadership is not reentrant); one of
// the same handle while another Campaign of it waits waits its turn.
func TestCampaignWhileLeading(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		e := election.New(c, name, hb)
		require.NoError(t, e.Campaign(ctx, "v"))
		term := e.Term()
		require.ErrorIs(t, e.Campaign(ctx, "w"), relock.ErrAlreadyHeld)
		assert.Equal(t, term, e.Term())
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "v", l.Value, "a refused Campaign changed the value")
		require.NoError(t, e.Resign(ctx))

		// Two Campaigns of one handle behind another leader: the first
		// leads, the second then finds it leading.
		leader := election.New(c, name, hb)
		require.NoError(t, leader.Campaign(ctx, "l"))
		errs := make(chan error, 2)
		for i := 0; i < 2; i++ {
			go func() { errs <- e.Campaign(ctx, "v") }()
		}
		waitQueued(t, s, name, 1)
		require.NoError(t, leader.Resign(ctx))
		first, second := <-errs, <-errs
		if first != nil {
			first, second = second, first
		}
		require.NoError(t, first)
		require.ErrorIs(t, second, relock.ErrAlreadyHeld)
		require.NoError(t, e.Resign(ctx))
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestTokensNotShown: no owner token appears in what an election shows:
// errors, Leader, Observe's reports, and the log that observers read.
func TestTokensNotShown(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		obs := collect(election.New(c, name).Observe(octx))
		obs.waitFor(t, 1, 5*time.Second)
		a, b := election.New(c, name, hb), election.New(c, name, hb)
		var shown []string
		note := func(err error) {
			if err != nil {
				shown = append(shown, err.Error())
			}
		}
		require.NoError(t, a.Campaign(ctx, "a"))
		note(b.Proclaim(ctx, "x"))
		note(b.Resign(ctx))
		note(a.Campaign(ctx, "again"))
		require.NoError(t, a.Proclaim(ctx, "a1"))
		l, err := b.Leader(ctx)
		require.NoError(t, err)
		shown = append(shown, fmt.Sprintf("%+v", l))
		members, err := s.Client(t).ZRange(ctx, base(name)+":log", 0, -1).Result()
		require.NoError(t, err)
		require.NotEmpty(t, members)
		shown = append(shown, members...)
		_, err = b.ForceResign(ctx)
		require.NoError(t, err)
		note(a.Resign(ctx))
		obs.waitFor(t, 4, 5*time.Second)
		for _, r := range obs.all() {
			shown = append(shown, fmt.Sprintf("%+v", r))
		}
		for _, tok := range []string{a.Token(), b.Token()} {
			for _, x := range shown {
				assert.NotContains(t, x, tok)
			}
		}
		assert.Contains(t, strings.Join(shown, "\n"), a.Fingerprint(), "the leader's fingerprint is shown")
	})
}

// TestResignEndedCtx: Resign is not cancelled by its ctx, as every
// release in relock: with a ctx ended already it still resigns, and the
// next candidate leads.
func TestResignEndedCtx(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		e := election.New(c, name, hb)
		require.NoError(t, e.Campaign(ctx, "v"))
		next := election.New(c, name, hb)
		done := queued(t, ctx, s, name, next, "n")
		ended, cancel := context.WithCancel(ctx)
		cancel()
		require.NoError(t, e.Resign(ended))
		require.NoError(t, outcome(t, done, 2*time.Second, "a Resign with an ended ctx did not hand over"))
		require.NoError(t, next.Resign(ctx))
	})
}

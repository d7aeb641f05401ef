package election_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/internal/redistest"
)

// lostWithin waits until e's Lost fires, for at most d.
func lostWithin(t *testing.T, e *election.Election, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-e.Lost():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("Lost did not fire within %v", d)
		return 0
	}
}

// TestForceResign: an operator's ForceResign ends the leadership whatever
// its owner and makes the next candidate leader; the former leader learns
// it from its watchdog: Lost fires, its HoldContext ends with the loss as
// cause, and its Resign returns ErrNotLeader with relock.ErrLockGone. It
// may then campaign again without resigning.
func TestForceResign(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		leader := election.New(c, name, hb)
		require.NoError(t, leader.Campaign(ctx, "l"))
		hctx := leader.HoldContext(ctx)
		next := election.New(c, name, hb)
		done := queued(t, ctx, s, name, next, "n")

		ok, err := election.New(newClient(t, s), name, hb).ForceResign(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		require.NoError(t, outcome(t, done, 2*time.Second, "ForceResign did not hand the leadership over"),
			"the next candidate after a ForceResign")
		t.Logf("Lost after %v", lostWithin(t, leader, lease))
		require.ErrorIs(t, leader.LostErr(), relock.ErrLockGone)
		<-hctx.Done()
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLockGone)
		assert.False(t, leader.Leading())
		err = leader.Resign(ctx)
		require.ErrorIs(t, err, election.ErrNotLeader)
		require.ErrorIs(t, err, relock.ErrNotHeld)
		require.ErrorIs(t, err, relock.ErrLockGone)
		l, err := next.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "n", l.Value)
		assert.Equal(t, next.Term(), l.Term)

		// Campaigning again after the loss, without a Resign.
		done2 := queued(t, ctx, s, name, leader, "l2")
		require.NoError(t, next.Resign(ctx))
		require.NoError(t, outcome(t, done2, 5*time.Second, "the former leader was not elected on the resignation"))
		assert.Greater(t, leader.Term(), l.Term)
		require.NoError(t, leader.Resign(ctx))
		ok, err = leader.ForceResign(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "ForceResign with nobody leading")
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestProclaimFindsLoss: a Proclaim that finds the leadership gone at
// Redis declares it lost at once (Lost fires before the watchdog's next
// renewal) and returns ErrNotLeader with relock.ErrLockGone.
func TestProclaimFindsLoss(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(time.Minute))
		name := redistest.Name(t)
		e := election.New(c, name)
		require.NoError(t, e.Campaign(ctx, "v"))
		require.NoError(t, s.Client(t).Del(ctx, base(name)).Err())
		err := e.Proclaim(ctx, "w")
		require.ErrorIs(t, err, election.ErrNotLeader)
		require.ErrorIs(t, err, relock.ErrLockGone)
		select {
		case <-e.Lost():
		default:
			t.Fatal("Lost did not fire on the Proclaim that found the leadership gone")
		}
		require.ErrorIs(t, e.LostErr(), relock.ErrLockGone)
		require.ErrorIs(t, e.Resign(ctx), election.ErrNotLeader)
	})
}

// TestUnreachableLeader: a leader cut off from Redis (its connection a
// black hole) learns it lost the leadership at its local deadline (Lost,
// relock.ErrLeaseExpired), and another candidate leads only after that,
// once the lease ran out at Redis, in a later term: when the next
// Campaign returns, the cut-off leader's Leading is false (it reads the
// clock; Lost is a timer, which a loaded machine runs late: CI30 saw it
// fire 0.25 ms after the next leader's election, 12 ms past the deadline).
// Observers see the vacancy between.
func TestUnreachableLeader(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		s.SingleOnly(t, "a proxy in front of one server")
		ctx := testCtx(t)
		name := redistest.Name(t)
		obs := collect(election.New(newClient(t, s), name).Observe(ctx))
		obs.waitFor(t, 1, 5*time.Second)

		p := redistest.NewProxy(t, s.Addr)
		cut := redistest.Server{Addr: p.Addr}
		rdb := cut.Client(t, func(o *redis.Options) {
			o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 200*time.Millisecond, 200*time.Millisecond, -1
		})
		leader := election.New(relock.New(rdb, relock.WithWatchdogTimeout(lease)), name, hb)
		require.NoError(t, leader.Campaign(ctx, "cut"))
		hctx := leader.HoldContext(ctx)

		next := election.New(newClient(t, s), name, hb)
		elected := make(chan time.Time, 1)
		campaign := make(chan error, 1)
		leading := make(chan bool, 1)
		go func() {
			err := next.Campaign(ctx, "next")
			leading <- leader.Leading()
			elected <- time.Now()
			campaign <- err
		}()
		waitQueued(t, s, name, 1)
		p.Blackhole(true)
		cutAt := time.Now()
		t.Logf("Lost %v after the cut", lostWithin(t, leader, 2*lease))
		lostAt := time.Now()
		require.ErrorIs(t, leader.LostErr(), relock.ErrLeaseExpired)
		select { // it ends right after Lost fires
		case <-hctx.Done():
		case <-time.After(time.Second):
			t.Fatal("the leadership's context outlived its loss")
		}
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLeaseExpired)
		var at time.Time
		select {
		case at = <-elected:
		case <-time.After(3 * lease):
			t.Fatal("no new leader after the cut-off leader's lease")
		}
		require.NoError(t, <-campaign)
		t.Logf("the next leader was elected %v after the cut, %v after Lost fired", at.Sub(cutAt), at.Sub(lostAt))
		assert.False(t, <-leading, "the cut-off leader still reported Leading when the next was elected")
		obs.waitFor(t, 4, 5*time.Second)
		got := obs.all()
		assert.Equal(t, "V", short(got[2]), show(got))
		assert.Equal(t, next.Term(), got[3].Term)
		assert.Greater(t, next.Term(), got[1].Term)
		p.Blackhole(false)
		err := leader.Resign(ctx)
		require.ErrorIs(t, err, election.ErrNotLeader)
		require.ErrorIs(t, err, relock.ErrLeaseExpired)
		require.NoError(t, next.Resign(ctx))
	})
}

// TestRun: fn runs while the handle leads, with a context that ends when
// the leadership is lost (cause: the loss); Do resigns when fn returns
// or panics, and returns fn's error joined with Resign's.
func TestDo(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c := newClient(t, s)
		name := redistest.Name(t)
		e := election.New(c, name, hb)
		errFn := errors.New("fn failed")
		err := e.Do(ctx, "r", func(fctx context.Context) error {
			assert.True(t, e.Leading())
			l, err := e.Leader(fctx)
			require.NoError(t, err)
			assert.Equal(t, "r", l.Value)
			return errFn
		})
		require.ErrorIs(t, err, errFn)
		require.NotErrorIs(t, err, election.ErrNotLeader)
		assert.False(t, e.Leading())
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader, "Do did not resign")

		// A loss ends fn's context; Do reports it.
		err = e.Do(ctx, "r", func(fctx context.Context) error {
			_, ferr := election.New(c, name, hb).ForceResign(ctx)
			require.NoError(t, ferr)
			select {
			case <-fctx.Done():
				require.ErrorIs(t, context.Cause(fctx), relock.ErrLockGone)
				return fctx.Err()
			case <-time.After(2 * lease):
				return errors.New("fn's context did not end on the loss")
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, election.ErrNotLeader)
		require.ErrorIs(t, err, relock.ErrLockGone)
		assert.Contains(t, err.Error(), "; and resign: ")

		// fn returns its context's cause, the loss: Do says it once.
		err = e.Do(ctx, "r", func(fctx context.Context) error {
			_, ferr := election.New(c, name, hb).ForceResign(ctx)
			require.NoError(t, ferr)
			select {
			case <-fctx.Done():
				return context.Cause(fctx)
			case <-time.After(2 * lease):
				return errors.New("fn's context did not end on the loss")
			}
		})
		require.ErrorIs(t, err, election.ErrNotLeader)
		require.ErrorIs(t, err, relock.ErrLockGone)
		assert.Equal(t, 1, strings.Count(err.Error(), "lock gone"), "the loss said once: %q", err)

		// A panic resigns too.
		func() {
			defer func() { assert.Equal(t, "boom", recover()) }()
			_ = e.Do(ctx, "p", func(context.Context) error { panic("boom") })
		}()
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader, "Do did not resign on a panic")

		// Not elected: fn does not run.
		other := election.New(c, name, hb)
		require.NoError(t, other.Campaign(ctx, "o"))
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err = e.Do(cctx, "r", func(context.Context) error { t.Error("fn ran"); return nil })
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.NoError(t, other.Resign(ctx))
		assertOnlyCounter(t, s, name, 2*lease)
	})
}

// TestRenewal: the watchdog keeps a leadership over several leases: no
// other candidate is elected, Lost does not fire, the term stays. (Leases
// of 300 ms ran out twice in local runs of the whole suite under -race, a
// renewal round held up that long: 600 ms.)
func TestRenewal(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const short = 600 * time.Millisecond
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(short))
		name := redistest.Name(t)
		e := election.New(c, name, hb)
		require.NoError(t, e.Campaign(ctx, "v"))
		term := e.Term()
		other := election.New(c, name, hb)
		cctx, cancel := context.WithTimeout(ctx, 4*short)
		defer cancel()
		err := other.Campaign(cctx, "o")
		require.ErrorIs(t, err, relock.ErrNotObtained, "another candidate was elected while the watchdog renewed")
		select {
		case <-e.Lost():
			t.Fatalf("Lost fired while the watchdog renewed: %v", e.LostErr())
		default:
		}
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, term, l.Term)
		assert.Equal(t, term, e.Term())
		require.NoError(t, e.Resign(ctx))
	})
}

// TestResume: a handle made with the leader's token (another process, or
// the same after a restart) adopts its leadership, with its term, and can
// proclaim, extend and resign it.
func TestResume(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		name := redistest.Name(t)
		const tok = "0123456789abcdef0123456789abcdef"
		first := election.New(newClient(t, s), name, relock.WithToken(tok))
		require.NoError(t, first.Campaign(ctx, "v"))
		second := election.New(newClient(t, s), name, relock.WithToken(tok), hb)
		require.NoError(t, second.Resume(ctx))
		assert.True(t, second.Leading())
		assert.Equal(t, first.Term(), second.Term())
		assert.Equal(t, first.Fingerprint(), second.Fingerprint())
		require.NoError(t, second.Extend(ctx, 2*lease))
		require.NoError(t, second.Proclaim(ctx, "w"))
		l, err := second.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, "w", l.Value)
		require.NoError(t, second.Resign(ctx))
		_, err = second.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
		err = election.New(newClient(t, s), name, relock.WithToken(tok)).Resume(ctx)
		require.ErrorIs(t, err, relock.ErrNotHeld, "Resume of a resigned leadership")
	})
}

// TestDeadCandidate: a candidate whose process died (here: its network
// cut) while it waits is dropped once its heartbeat runs out, with its
// value: the leader's resignation then hands over to the live candidate
// behind it at once, and observers never see the dead one lead.
func TestDeadCandidate(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		s.SingleOnly(t, "a proxy in front of one address")
		ctx := testCtx(t)
		const beat = 500 * time.Millisecond
		name := redistest.Name(t)
		c := newClient(t, s)
		obs := collect(election.New(c, name).Observe(ctx))
		obs.waitFor(t, 1, 5*time.Second)
		p := redistest.NewProxy(t, s.Addr)
		dc := relock.New(redis.NewClient(&redis.Options{Addr: p.Addr}), relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = dc.Close() })

		leader := election.New(c, name, hb)
		require.NoError(t, leader.Campaign(ctx, "l"))
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		dead := election.New(dc, name, relock.WithHeartbeat(beat))
		deadDone := make(chan error, 1)
		go func() { deadDone <- dead.Campaign(dctx, "dead") }()
		waitQueued(t, s, name, 1)
		next := election.New(c, name, hb)
		nextDone := make(chan error, 1)
		go func() { nextDone <- next.Campaign(ctx, "next") }()
		waitQueued(t, s, name, 2)
		p.Blackhole(true)
		time.Sleep(beat + 200*time.Millisecond)

		resigned := time.Now()
		require.NoError(t, leader.Resign(ctx))
		select {
		case err := <-nextDone:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("the live candidate behind a dead one was not elected")
		}
		t.Logf("the live candidate led %v after the resignation", time.Since(resigned))
		assert.Less(t, time.Since(resigned), 500*time.Millisecond, "the dead candidate held the line")
		rdb := s.Client(t)
		assert.Zero(t, rdb.Exists(ctx, base(name)+":values").Val(), "the dead candidate's value was kept")
		assert.Zero(t, rdb.ZCard(ctx, base(name)+":queue").Val())
		obs.waitFor(t, 3, 2*time.Second)
		got := obs.all()
		assert.Equal(t, fmt.Sprintf("V %d:l %d:next", got[1].Term, got[1].Term+1), show(got))

		cancel()
		p.Blackhole(false)
		require.Error(t, <-deadDone)
		require.NoError(t, next.Resign(ctx))
	})
}

// TestSyncReplicas: with relock.WithSyncReplicas a new leadership waits
// for the master's replicas; asking for more replicas than there are, the
// Campaign fails with relock.ErrNotReplicated and nobody leads.
func TestSyncReplicas(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, _ *redistest.Server) {
		ctx := testCtx(t)
		master := redistest.StartManaged(t, "", "--repl-diskless-sync-delay", "0")
		host, port, err := net.SplitHostPort(master.Addr)
		require.NoError(t, err)
		redistest.StartManaged(t, "", "--replicaof", host, port)
		rdb := master.Node(t)
		require.Eventually(t, func() bool {
			c := rdb.Conn()
			defer c.Close()
			c.Set(ctx, "relock-test:warm-up", 1, time.Minute)
			wait := redis.NewIntCmd(ctx, "WAIT", 1, 100)
			_ = c.Process(ctx, wait)
			return wait.Val() == 1
		}, 10*time.Second, time.Millisecond, "the replica never confirmed a write")
		// A 3 s lease, renewed every second: a renewal counts once its WAIT
		// returns, and with a 1 s lease the WAIT had about 600 ms before
		// the local deadline, which it overran on CI78's loaded first pass
		// (the hold was lost before the Resign).
		const held = 3 * lease
		c := relock.New(rdb, relock.WithWatchdogTimeout(held))
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)

		// 2 s: a 500 ms WAIT ran out on a loaded machine (CI43) while the
		// replica, a process of its own, was starved of CPU.
		e := election.New(c, name, relock.WithSyncReplicas(1, 2*time.Second))
		require.NoError(t, e.Campaign(ctx, "v"), "one replica, one asked")
		time.Sleep(held + lease/2) // renewals confirmed by the replica keep it
		assert.True(t, e.Leading())
		require.NoError(t, e.Resign(ctx))

		greedy := election.New(c, name, relock.WithSyncReplicas(2, 100*time.Millisecond))
		err = greedy.Campaign(ctx, "g")
		require.ErrorIs(t, err, relock.ErrNotReplicated, "two replicas asked, one there")
		assert.False(t, greedy.Leading())
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader, "a leadership the replicas did not confirm was left")
	})
}

package locktest

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/shard"
)

// refusals counts the replies of a Cluster's nodes that refused a command
// because its slot was moving (shard.Moving), before go-redis or relock
// sent it again.
type refusals struct{ n atomic.Int64 }

func (r *refusals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if shard.Moving(cmd.Err()) {
			r.n.Add(1)
		}
		return err
	}
}

func (r *refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if shard.Moving(cmd.Err()) {
				r.n.Add(1)
			}
		}
		return err
	}
}

// ClusterReshard migrates the slots of locks back and forth between the
// two masters of a cluster of the test's own, key by key, while two
// Clients take and release those locks in a loop and a third holds other
// locks of the same slots on its watchdog (lease 2 s) across every move,
// all as a user with exactly the ACL rules of docs/operations.md for a Cluster. While
// a slot migrates, Redis refuses the locks' scripts (ASK, TRYAGAIN; the
// test counts the refusals and requires some). No two owners may be
// inside one lock at once (an oracle in the test), no call may fail or
// stay stuck, the long holds must never be lost (their renewals follow
// their slots to the new master), Redis must refuse the user nothing, and
// no key of the locks but short-lived request records may be left.
func ClusterReshard(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	s := redistest.ACLOn(t, cl)
	ctx := testCtx(t)
	admin := s.Admin(t).(*redis.ClusterClient)
	a, b := cl.Nodes[0], cl.Nodes[1]
	base := redistest.Name(t)
	refused := new(refusals)
	client := func(lease time.Duration) *relock.Client {
		rdb := s.Client(t).(*redis.ClusterClient)
		rdb.OnNewNode(func(n *redis.Client) { n.AddHook(refused) }) // before its first command
		c := relock.New(rdb, relock.WithWatchdogTimeout(lease))
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	// Two hash tags whose slots start on a; four locks in each slot.
	type group struct {
		slot  int64
		names []string
	}
	var groups []group
	for i := 0; len(groups) < 2; i++ {
		prefix := base + "{" + strconv.Itoa(i) + "}."
		m, err := admin.MasterForKey(ctx, k.Key(prefix+"0"))
		require.NoError(t, err)
		if m.Options().Addr != a.Addr {
			continue
		}
		slot, err := admin.ClusterKeySlot(ctx, k.Key(prefix+"0")).Result()
		require.NoError(t, err)
		g := group{slot: slot}
		for j := 0; j < 4; j++ {
			g.names = append(g.names, prefix+strconv.Itoa(j))
			other, err := admin.ClusterKeySlot(ctx, k.Key(g.names[j])).Result()
			require.NoError(t, err)
			require.Equal(t, slot, other, "%s is not in the slot of its hash tag", g.names[j])
		}
		groups = append(groups, g)
	}

	holder := client(2 * time.Second)
	var held []Handle
	var contended []string
	for _, g := range groups {
		h := k.New(holder, g.names[0])
		require.NoError(t, h.Lock(ctx))
		held = append(held, h)
		contended = append(contended, g.names[1:]...)
	}

	// The workers: three goroutines on each of two Clients, one handle per
	// goroutine and lock (a new handle per cycle would fill the slots
	// with request records, and make each move last longer).
	inside := make(map[string]*atomic.Int32, len(contended))
	for _, name := range contended {
		inside[name] = new(atomic.Int32)
	}
	var (
		stop            atomic.Bool
		cycles, doubles atomic.Int64
		mu              sync.Mutex
		failures        []string
		wg              sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	for w := 0; w < 2; w++ {
		c := client(5 * time.Second)
		for g := 0; g < 3; g++ {
			handles := map[string]Handle{}
			for _, name := range contended {
				handles[name] = k.New(c, name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					name := contended[rand.IntN(len(contended))]
					h := handles[name]
					lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := h.Lock(lctx)
					cancel()
					if err != nil {
						fail("Lock of %s: %v", name, err)
						continue
					}
					if inside[name].Add(1) != 1 {
						doubles.Add(1)
					}
					time.Sleep(time.Millisecond)
					inside[name].Add(-1)
					cycles.Add(1)
					uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					if err := h.Unlock(uctx); err != nil {
						fail("Unlock of %s: %v", name, err)
					}
					cancel()
				}
			}()
		}
	}

	// The moves: every slot to b and back to a, keys 2 ms apart, for at
	// least three leases of the long holds.
	start := time.Now()
	moves := 0
	var longest time.Duration
	for round := 0; round < 3 || time.Since(start) < 6*time.Second; round++ {
		for _, hop := range [][2]*redistest.ClusterNode{{a, b}, {b, a}} {
			for _, g := range groups {
				began := time.Now()
				require.NoError(t, redistest.Migrate(ctx, g.slot, hop[0], hop[1], 2*time.Millisecond), "moving slot %d", g.slot)
				longest = max(longest, time.Since(began))
				moves++
			}
		}
	}
	elapsed := time.Since(start)
	time.Sleep(500 * time.Millisecond) // a last stretch on settled slots
	stop.Store(true)
	wg.Wait()
	t.Logf("%d moves in %v (the longest %v); %d cycles of %d locks; %d refusals sent again",
		moves, elapsed.Round(time.Millisecond), longest.Round(time.Millisecond), cycles.Load(), len(contended), refused.n.Load())

	assert.Zero(t, doubles.Load(), "two owners inside one lock at once")
	assert.Empty(t, failures, "calls that failed during the moves")
	assert.Positive(t, cycles.Load())
	assert.Positive(t, refused.n.Load(), "Redis never refused a command: the moves did not test the resends")
	for i, h := range held {
		select {
		case <-h.Lost():
			t.Errorf("the hold of %s was lost across the moves: %v", groups[i].names[0], h.LostErr())
		default:
		}
		assert.NoError(t, h.Unlock(ctx), "Unlock of %s", groups[i].names[0])
	}

	assert.Empty(t, leftKeys(t, s, k, base), "keys left after every holder and waiter is gone")
}

// leftKeys returns the keys of locks whose names contain base, but
// short-lived request records and the keys k keeps (Kind.Keeps).
func leftKeys(t *testing.T, s *redistest.Server, k Kind, base string) []string {
	t.Helper()
	return lasting(s.Keys(t, "relock:*"+base+"*"), k)
}

// lasting returns keys but short-lived request records and the keys k
// keeps (Kind.Keeps).
func lasting(keys []string, k Kind) []string {
	var left []string
next:
	for _, key := range keys {
		if strings.Contains(key, ":r:") {
			continue
		}
		for _, suffix := range k.Keeps {
			if strings.HasSuffix(key, "}"+suffix) {
				continue next
			}
		}
		left = append(left, key)
	}
	return left
}

// ClusterReleaseMidMigration releases a lock, a waiter queued behind it,
// while its slot is marked migrating and none of its keys has moved yet
// (all of them still at the source). No script may run there half-way
// (one that empties a key and touches it again would fail at the source,
// "Script attempted to access a non local key", its first writes kept):
// the release must wait for the migration, then complete, and the waiter
// get the lock.
func ClusterReleaseMidMigration(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	s := &redistest.Server{Addr: cl.Nodes[0].Addr, Cluster: cl}
	ctx := testCtx(t)
	admin := s.Admin(t).(*redis.ClusterClient)
	a, b := cl.Nodes[0], cl.Nodes[1]
	long := relock.WithWatchdogTimeout(10 * time.Second)
	c, _ := redistest.NewClient(t, s, long)
	wc, _ := redistest.NewClient(t, s, long)
	base := redistest.Name(t)
	name := (&namer{base: base}).on(t, ctx, admin, k, a.Addr, 1)[0]
	slot, err := admin.ClusterKeySlot(ctx, k.Key(name)).Result()
	require.NoError(t, err)

	h, w := k.New(c, name), k.waiter(wc, name)
	require.NoError(t, h.Lock(ctx))
	waits := lockAsync(ctx, w)
	time.Sleep(queued)
	require.NoError(t, redistest.BeginMigration(ctx, slot, a, b))
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-unlocked:
		t.Fatalf("Unlock returned while its slot was migrating (%v): a script ran at the source", err)
	default:
	}
	require.NoError(t, redistest.FinishMigration(ctx, slot, a, b, 0))
	require.NoError(t, await(t, unlocked, 5*time.Second, "Unlock"), "Unlock once the slot has moved")
	require.NoError(t, await(t, waits, 5*time.Second, "the waiter's Lock"), "the waiter's Lock")
	require.NoError(t, w.Unlock(ctx))
	assert.Empty(t, leftKeys(t, s, k, base), "keys left after every holder and waiter is gone")

	// A Lock whose ctx ends while its slot migrates: its attempt is
	// refused until then, and its clean-up (the abort of that attempt,
	// then leaving the queue), refused too, is resent within one window
	// of core.ReleaseTimeout in all (it took two, 10 s).
	require.NoError(t, h.Lock(ctx))
	require.NoError(t, redistest.BeginMigration(ctx, slot, b, a))
	impatient := k.waiter(wc, name, relock.WithHeartbeat(time.Second))
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err = impatient.Lock(wctx)
	took := time.Since(start)
	cancel()
	t.Logf("a Lock whose ctx ended mid-migration returned after %v: %v", took.Round(time.Millisecond), err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, relock.ErrNotObtained)
	assert.Less(t, took, 300*time.Millisecond+core.ReleaseTimeout+time.Second,
		"the clean-up after the ctx ended took more than one window")
	require.NoError(t, redistest.FinishMigration(ctx, slot, b, a, 0))
	require.NoError(t, h.Unlock(ctx))
	// What the clean-up could not undo lapses within the waiter's
	// heartbeat.
	require.Eventually(t, func() bool {
		// Not leftKeys: this runs in a goroutine that may outlive t.
		keys, err := s.ScanKeys("relock:*" + base + "*")
		return err == nil && len(lasting(keys, k)) == 0
	}, 5*time.Second, 100*time.Millisecond,
		"keys left after every holder and waiter is gone: %v", leftKeys(t, s, k, base))
}

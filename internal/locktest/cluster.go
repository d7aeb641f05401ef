package locktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
)

// pushed bounds a hand-off that a pushed wake-up made: a waiter without
// it retries on its timer, a second later (the tests' leases are long).
const pushed = 600 * time.Millisecond

// ClusterNames checks, on the binary's Redis Cluster, that every name the
// API accepts keeps all the keys of its lock in one slot: holding,
// waiting (queue keys, request records) and releasing never meet a
// CROSSSLOT error.
func ClusterNames(t *testing.T, k Kind) {
	s := redistest.ClusterServer(t)
	ctx := testCtx(t)
	c, _ := redistest.NewClient(t, s)
	base := redistest.Name(t)
	for _, name := range []string{
		base, base + "{a}b", "{" + base + "}", base + "}x", base + "{", base + "{}",
		"{}" + base, base + "\x00\xff\xfe", base + ".名前", base + strings.Repeat("z", core.MaxNameLen-len(base)),
	} {
		h, w := k.New(c, name), k.waiter(c, name)
		require.NoError(t, h.Lock(ctx), "%q", name)
		ok, err := w.TryLock(ctx)
		require.NoError(t, err, "%q", name)
		require.False(t, ok, "%q", name)
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = w.Lock(wctx) // queues itself, then gives up
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%q", name)
		require.NoError(t, h.Unlock(ctx), "%q", name)
		require.NoError(t, w.Lock(ctx), "%q", name)
		require.NoError(t, w.Unlock(ctx), "%q", name)
	}
}

// ClusterWakeUps checks wake-ups on a Redis Cluster: locks of different
// names live on different masters; a release publishes with SPUBLISH
// (sharded pub/sub) on its lock's master only, never a cluster-wide
// PUBLISH; a Client's waiters share at most one pub/sub connection per
// master; and when those connections are killed, the waiters' channels
// are subscribed again within a second (releases then reach them by
// push), waiters released at once still get their locks, and the next
// waiters are pushed again.
//
// It kills every pub/sub connection of its cluster and counts its PUBLISH
// calls: the cluster is its own (on the binary's, that would disturb, and
// count, the tests that run beside it).
func ClusterWakeUps(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 3, 5*time.Second)
	s := &redistest.Server{Addr: cl.Nodes[0].Addr, Cluster: cl}
	ctx := testCtx(t)
	admin := s.Admin(t).(*redis.ClusterClient)
	var b [4]byte
	_, _ = rand.Read(b[:])
	conns := "relock-test-" + hex.EncodeToString(b[:])
	long := relock.WithWatchdogTimeout(30 * time.Second)
	c := relock.New(s.Client(t), long)
	t.Cleanup(func() { _ = c.Close() })
	// The waiters' Client names its connections, to count them.
	wc := relock.New(s.Client(t, func(o *redis.Options) { o.ClientName = conns }), long)
	t.Cleanup(func() { _ = wc.Close() })

	base := redistest.Name(t)
	names := make([]string, 12)
	masters := map[string]bool{}
	for i := range names {
		names[i] = base + "." + strconv.Itoa(i)
		m, err := admin.MasterForKey(ctx, k.Key(names[i]))
		require.NoError(t, err)
		masters[m.Options().Addr] = true
	}
	require.Len(t, masters, 3, "12 names on fewer than 3 masters")

	stats := func() (pub, spub int64) {
		var mu sync.Mutex
		require.NoError(t, admin.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info := m.Info(ctx, "commandstats").Val()
			mu.Lock()
			defer mu.Unlock()
			pub += calls(info, "publish")
			spub += calls(info, "spublish")
			return nil
		}))
		return pub, spub
	}
	// pubSubConns counts the waiters' Client's pub/sub connections per
	// master (no t in it: it runs in a condition of Eventually).
	pubSubConns := func() (map[string]int, error) {
		out := map[string]int{}
		var mu sync.Mutex
		err := admin.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			list, err := m.ClientList(ctx).Result()
			mu.Lock()
			defer mu.Unlock()
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, " name="+conns+" ") && strings.Contains(line, " flags=P ") {
					out[m.Options().Addr]++
				}
			}
			return err
		})
		return out, err
	}

	// round: every name held, a waiter behind each, then every holder
	// releases; each waiter's Lock must return within within of its
	// release.
	round := func(within time.Duration, during func()) {
		t.Helper()
		q := holdWithWaiters(t, ctx, k, c, wc, admin, names)
		if during != nil {
			during()
		}
		q.handOver(t, ctx, within, "")
	}

	pub0, spub0 := stats()
	round(pushed, func() {
		// Every waiter is queued, and subscribes right after (its first
		// attempt queues it): on a loaded machine, the last subscriptions
		// came after the waiters' 150 ms.
		var per map[string]int
		assert.Eventually(t, func() bool {
			var err error
			per, err = pubSubConns()
			return err == nil && len(per) == 3
		}, 5*time.Second, 10*time.Millisecond, "waiters on every master, each with a subscription there")
		t.Logf("pub/sub connections per master: %v", per)
		for addr, n := range per {
			assert.Equal(t, 1, n, "pub/sub connections of one Client on master %s", addr)
		}
	})
	pub1, spub1 := stats()
	assert.Equal(t, pub0, pub1, "a cluster-wide PUBLISH")
	assert.GreaterOrEqual(t, spub1-spub0, int64(len(names)), "SPUBLISH calls for %d releases", len(names))

	// Pub/sub connections killed while waiters wait: the Client
	// subscribes their channels again, and the releases that follow
	// reach them by push...
	kill := func() {
		require.NoError(t, admin.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err()
		}))
	}
	round(pushed, func() {
		kill()
		time.Sleep(time.Second)
	})
	// ... and releases right after the kill still reach their waiters (on
	// their timers, at most a second apart, if not by push).
	round(5*time.Second, kill)
	round(pushed, nil)
}

// calls returns the calls count of cmd in INFO commandstats.
func calls(info, cmd string) int64 {
	prefix := "cmdstat_" + cmd + ":calls="
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

// ClusterFailover kills a master of a cluster of the test's own while
// locks are held on every master, and checks what docs/deployment.md promises:
// nothing hangs; the locks of the other masters are untouched; a hold on
// the dead master is either kept (its key had reached the replica that
// took over) or reported lost (Lost fires, Unlock returns ErrNotHeld),
// and never may another owner take a lock whose holder was not told; a
// hold made WithSyncReplicas, acknowledged by the replica, is kept from
// other owners; and the lock works again once the replica took over.
func ClusterFailover(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 3, time.Second)
	s := &redistest.Server{Addr: cl.Nodes[1].Addr, Cluster: cl}
	ctx := testCtx(t)
	// Leases long enough to outlast the failover (about 2-3 s).
	c, rdb := redistest.NewClient(t, s, relock.WithWatchdogTimeout(6*time.Second))
	other, _ := redistest.NewClient(t, s)
	cc := rdb.(*redis.ClusterClient)
	victim := cl.Nodes[0] // a master: the masters come first

	type hold struct {
		name   string
		h      Handle
		synced bool
		dead   bool // on the master that dies
	}
	base := redistest.Name(t)
	var holds []hold
	onVictim, synced := 0, 0
	for i := 0; i < 24; i++ {
		name := base + "." + strconv.Itoa(i)
		m, err := cc.MasterForKey(ctx, k.Key(name))
		require.NoError(t, err)
		dead := m.Options().Addr == victim.Addr
		var opts []relock.LockOption
		if dead && i%2 == 1 {
			opts = append(opts, relock.WithSyncReplicas(1, 2*time.Second))
		}
		h := k.New(c, name, opts...)
		require.NoError(t, h.Lock(ctx), "lock %s", name)
		holds = append(holds, hold{name: name, h: h, synced: len(opts) > 0, dead: dead})
		if dead {
			onVictim++
			if len(opts) > 0 {
				synced++
			}
		}
	}
	require.Positive(t, onVictim, "no name on the master that dies")
	require.Positive(t, synced, "no synced hold on the master that dies")

	require.NoError(t, victim.Crash())
	promoted := cl.Nodes[3]  // the victim's replica
	pc := promoted.Client(t) // one client for every poll, and no t in it
	require.Eventually(t, func() bool {
		return strings.Contains(pc.Info(ctx, "replication").Val(), "role:master")
	}, 20*time.Second, 50*time.Millisecond, "the replica never took over")
	// Give the watchdog a lease to renew at the new master, or to report.
	time.Sleep(2 * time.Second)

	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 10*time.Second) }
	kept, lost := 0, 0
	for _, x := range holds {
		cctx, cancel := call()
		ok, err := k.New(other, x.name).TryLock(cctx)
		cancel()
		require.NoError(t, err, "TryLock of %s after the failover", x.name)
		wasLost := false
		select {
		case <-x.h.Lost():
			wasLost = true
		default:
		}
		switch {
		case !x.dead:
			assert.False(t, ok, "another owner took %s, on a master that did not die", x.name)
			assert.False(t, wasLost, "%s lost, on a master that did not die", x.name)
		case x.synced:
			assert.False(t, ok, "another owner took %s, held WithSyncReplicas", x.name)
		case ok:
			// Taken by another owner: the holder must have been told.
			assert.True(t, wasLost, "%s taken by another owner while its holder was not told", x.name)
		}
		cctx, cancel = call()
		err = x.h.Unlock(cctx)
		cancel()
		if wasLost {
			lost++
			assert.ErrorIs(t, err, relock.ErrNotHeld, "Unlock of %s after Lost", x.name)
		} else {
			kept++
			assert.NoError(t, err, "Unlock of %s, never reported lost", x.name)
		}
	}
	t.Logf("%d holds on the dead master (%d synced): %d kept, %d reported lost", onVictim, synced, kept-(len(holds)-onVictim), lost)

	// The lock works again on the promoted replica.
	for _, x := range holds {
		if !x.dead {
			continue
		}
		cctx, cancel := call()
		h := k.New(other, x.name)
		require.NoError(t, h.Lock(cctx), "Lock of %s after the failover", x.name)
		require.NoError(t, h.Unlock(cctx))
		cancel()
	}
}

// ClusterMoves moves locks that have holders and waiters to another
// master, on a cluster of the test's own: a manual failover (CLUSTER
// FAILOVER: the old master stays up and gives its slots to its replica)
// and a slot migration (CLUSTER SETSLOT, MIGRATE). Each time the waiters'
// channels must be subscribed in the new master's shard (at it or at a
// replica of it) within a few seconds,
// nobody else may take a held lock, and the releases that follow must
// reach the waiters by push.
func ClusterMoves(t *testing.T, k Kind) {
	cl := redistest.StartCluster(t, 3, time.Second)
	s := &redistest.Server{Addr: cl.Nodes[1].Addr, Cluster: cl}
	ctx := testCtx(t)
	admin := s.Admin(t).(*redis.ClusterClient)
	long := relock.WithWatchdogTimeout(30 * time.Second)
	c := relock.New(s.Client(t), long)
	wc := relock.New(s.Client(t), long)
	t.Cleanup(func() { _ = c.Close(); _ = wc.Close() })
	clients := map[string]*redis.Client{}
	node := func(addr string) *redis.Client {
		if n := clients[addr]; n != nil {
			return n
		}
		n := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = n.Close() })
		clients[addr] = n
		return n
	}
	nm := &namer{base: redistest.Name(t)}
	// shard returns clients of the master at addr and of its replicas. A
	// subscription at a replica gets the shard's messages too (Redis
	// passes SPUBLISH on to the shard's replicas), and a reroute that ran
	// before go-redis saw the move may land there: a demoted master
	// answers SSUBSCRIBE for its new master's slots as a replica.
	shard := func(addr string) []*redis.Client {
		out := []*redis.Client{node(addr)}
		for _, n := range cl.Nodes {
			if n.Addr != addr {
				continue
			}
			lines, err := out[0].Do(ctx, "CLUSTER", "REPLICAS", n.ID).StringSlice()
			if err != nil {
				return out // asked again at the next poll
			}
			for _, l := range lines {
				if f := strings.Fields(l); len(f) > 1 {
					out = append(out, node(strings.Split(f[1], "@")[0]))
				}
			}
		}
		return out
	}
	// Holds whose renewals a replica must confirm (WithSyncReplicas) are
	// renewed on their node's own connection, which go-redis does not
	// redirect: after a move, the node answers MOVED until the Client's
	// view of the cluster is reloaded (they used to be lost ~3 s after the
	// move, their keys intact at the new master). Their short lease shows
	// a loss within the test.
	const syncLease = 900 * time.Millisecond
	sc := relock.New(s.Client(t), relock.WithWatchdogTimeout(syncLease))
	t.Cleanup(func() { _ = sc.Close() })

	// move holds names with a waiter behind each, and syncName's lock
	// WithSyncReplicas, runs f, checks that the waiters' channels are
	// subscribed in the shard of the master at to and that the locks are
	// still held, then releases them one by one (each hand-off pushed).
	move := func(what string, names []string, syncName, to string, f func()) {
		q := holdWithWaiters(t, ctx, k, c, wc, admin, names)
		synced := k.New(sc, syncName, relock.WithSyncReplicas(1, 500*time.Millisecond))
		require.NoError(t, synced.Lock(ctx), "%s: a hold confirmed by a replica", what)
		f()
		time.Sleep(3 * syncLease)
		assert.NoError(t, synced.LostErr(), "%s: a hold WithSyncReplicas was lost after its slot moved", what)
		assert.NoError(t, synced.Unlock(ctx), "%s: the hold WithSyncReplicas", what)
		for _, name := range names {
			at := ""
			require.Eventually(t, func() bool {
				// Asked afresh: a demoted master shows as its new
				// master's replica only once the news has spread.
				for _, n := range shard(to) {
					chans, err := n.Do(ctx, "PUBSUB", "SHARDCHANNELS", "*{"+name+"}*").StringSlice()
					if err == nil && len(chans) > 0 {
						at = n.Options().Addr
						return true
					}
				}
				return false
			}, 10*time.Second, 20*time.Millisecond, "%s: the waiter of %s never subscribed in its new master's shard", what, name)
			if at != to {
				t.Logf("%s: the waiter of %s subscribed at %s, a replica of its new master", what, name, at)
			}
			ok, err := k.New(c, name).TryLock(ctx)
			require.NoError(t, err, "%s: TryLock of %s", what, name)
			require.False(t, ok, "%s: %s taken while held", what, name)
		}
		q.handOver(t, ctx, pushed, what+": ")
	}

	// A manual failover of the first master.
	victim, replica := cl.Nodes[0], cl.Nodes[3]
	on := nm.on(t, ctx, admin, k, victim.Addr, 5)
	move("failover", on[:4], on[4], replica.Addr, func() {
		rc := node(replica.Addr)
		require.NoError(t, rc.Do(ctx, "CLUSTER", "FAILOVER").Err())
		require.Eventually(t, func() bool {
			return strings.Contains(rc.Info(ctx, "replication").Val(), "role:master")
		}, 10*time.Second, 20*time.Millisecond, "the replica never took over")
	})

	// The slots of three locks migrated from the second master to the
	// third.
	src, dst := cl.Nodes[1], cl.Nodes[2]
	moved := nm.on(t, ctx, admin, k, src.Addr, 4)
	move("migration", moved[:3], moved[3], dst.Addr, func() {
		sc := node(src.Addr)
		slots := map[int64]bool{}
		for _, name := range moved {
			slot, err := sc.ClusterKeySlot(ctx, k.Key(name)).Result()
			require.NoError(t, err)
			slots[slot] = true
		}
		for slot := range slots {
			require.NoError(t, redistest.Migrate(ctx, slot, src, dst, 0))
		}
	})
}

// waitingLocks are locks held with a waiter behind each.
type waitingLocks struct {
	names            []string
	holders, waiters []Handle
	waits            []<-chan error
}

// holdWithWaiters holds every lock of names with c, starts a waiter
// behind each with wc, waits until each is queued (seen through admin:
// on a loaded machine a fixed 150 ms was not always enough, and a release
// then found no waiter to wake), and gives them the time to subscribe
// (and, for a lock that hands over only to starving waiters, to pass the
// starvation threshold).
func holdWithWaiters(t *testing.T, ctx context.Context, k Kind, c, wc *relock.Client, admin redis.UniversalClient, names []string) *waitingLocks {
	t.Helper()
	q := &waitingLocks{names: names, holders: make([]Handle, len(names)),
		waiters: make([]Handle, len(names)), waits: make([]<-chan error, len(names))}
	for i, name := range names {
		q.holders[i] = k.New(c, name)
		require.NoError(t, q.holders[i].Lock(ctx))
		q.waiters[i] = k.waiter(wc, name)
		q.waits[i] = lockAsync(ctx, q.waiters[i])
	}
	for _, name := range names {
		waitQueued(t, admin, k, name, 1)
	}
	time.Sleep(queued)
	return q
}

// handOver releases the locks one by one: each waiter's Lock must return
// within within of its release; the waiter then unlocks. what prefixes
// the failure messages.
func (q *waitingLocks) handOver(t *testing.T, ctx context.Context, within time.Duration, what string) {
	t.Helper()
	for i, h := range q.holders {
		released := time.Now()
		require.NoError(t, h.Unlock(ctx), "%sUnlock of %s", what, q.names[i])
		require.NoError(t, await(t, q.waits[i], 5*time.Second, what+"a waiter's Lock"))
		assert.Less(t, time.Since(released), within, "%shand-off of %s", what, q.names[i])
		require.NoError(t, q.waiters[i].Unlock(ctx))
	}
}

// namer makes lock names base.0, base.1, ... on the masters a test asks.
type namer struct {
	base string
	next int
}

// on returns n new names whose locks of kind k live on the master at
// addr.
func (nm *namer) on(t *testing.T, ctx context.Context, admin *redis.ClusterClient, k Kind, addr string, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		name := nm.base + "." + strconv.Itoa(nm.next)
		nm.next++
		m, err := admin.MasterForKey(ctx, k.Key(name))
		require.NoError(t, err)
		if m.Options().Addr == addr {
			out = append(out, name)
		}
	}
	return out
}

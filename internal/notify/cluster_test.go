package notify_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/redistest"
)

// channelOn returns a new channel whose slot the master at addr serves.
func channelOn(t *testing.T, cc *redis.ClusterClient, addr string) string {
	t.Helper()
	base := redistest.Name(t)
	for i := 0; ; i++ {
		ch := "relock:test:{" + base + "." + strconv.Itoa(i) + "}"
		m, err := cc.MasterForKey(context.Background(), ch)
		require.NoError(t, err)
		if m.Options().Addr == addr {
			return ch
		}
	}
}

// pushedAt waits until ch has a sharded subscriber at the node at addr or
// at one of replicas (nodes of its shard, which get the shard's messages
// too), and then checks that a SPUBLISH at addr reaches sub.
func pushedAt(t *testing.T, addr, ch string, sub *notify.Sub, within time.Duration, replicas ...string) {
	t.Helper()
	ctx := context.Background()
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	start := time.Now()
	at := ""
	require.Eventually(t, func() bool {
		for _, a := range append([]string{addr}, replicas...) {
			c := redis.NewClient(&redis.Options{Addr: a})
			v, err := c.Do(ctx, "PUBSUB", "SHARDNUMSUB", ch).Slice()
			_ = c.Close()
			if err == nil && len(v) == 2 && v[1] == int64(1) {
				at = a
				return true
			}
		}
		return false
	}, within, 20*time.Millisecond, "the channel was not subscribed again at %s within %v", addr, within)
	t.Logf("subscribed at %s again after %v (the master: %v)", at, time.Since(start), at == addr)
	for {
		select {
		case <-sub.C: // a wake-up of the drop, or the push
		default:
			require.NoError(t, n.SPublish(ctx, ch, notify.WakeAll).Err())
			select {
			case <-sub.C:
			case <-time.After(time.Second):
				t.Fatal("a SPUBLISH at the channel's master did not reach its waiter")
			}
			return
		}
	}
}

// TestClusterErrorReply: a SSUBSCRIBE refused with an error reply
// (CLUSTERDOWN: nobody serves the slot for a moment) drops the
// connection; the channel is subscribed again once its slot is served,
// and its waiter is pushed. It may be subscribed at the master's replica
// (3 runs of 20 on an idle machine): go-redis sends a command of a slot
// that its view of the cluster gives nobody to a random node, and its
// view may be older than the slot's new master; the replica takes the
// SSUBSCRIBE and gets its master's messages.
func TestClusterErrorReply(t *testing.T) {
	redistest.Parallel(t)
	cl := redistest.StartCluster(t, 3, time.Second)
	ctx := context.Background()
	cc := cl.Client(t)
	h := notify.New(cc)
	t.Cleanup(func() { _ = h.Close() })
	owner := cl.Nodes[0].Addr
	ch := channelOn(t, cc, owner)
	oc := redis.NewClient(&redis.Options{Addr: owner})
	defer oc.Close()
	slot := oc.ClusterKeySlot(ctx, ch).Val()
	for _, n := range cl.Nodes {
		require.NoError(t, n.Client(t).Do(ctx, "CLUSTER", "DELSLOTS", slot).Err())
	}

	sub, err := h.Subscribe(ctx, ch, "")
	require.NoError(t, err)
	defer sub.Close()

	require.NoError(t, oc.Do(ctx, "CLUSTER", "ADDSLOTS", slot).Err())
	require.NoError(t, oc.Do(ctx, "CLUSTER", "BUMPEPOCH").Err())
	pushedAt(t, owner, ch, sub, 20*time.Second, cl.Nodes[3].Addr) // 10 s passed on a loaded machine
}

// TestClusterFrozenMaster: a master that stops answering without closing
// its connections (a frozen or cut-off host; here SIGSTOP) is failed
// over; the hub notices that its PING is not answered, drops the
// connection and subscribes the channel at the promoted replica.
func TestClusterFrozenMaster(t *testing.T) {
	redistest.Parallel(t)
	cl := redistest.StartCluster(t, 3, time.Second)
	ctx := context.Background()
	cc := cl.Client(t)
	h := notify.New(cc)
	t.Cleanup(func() { _ = h.Close() })
	victim, replica := cl.Nodes[0], cl.Nodes[3]
	ch := channelOn(t, cc, victim.Addr)
	sub, err := h.Subscribe(ctx, ch, "")
	require.NoError(t, err)
	defer sub.Close()

	require.NoError(t, victim.Freeze())
	t.Cleanup(func() { _ = victim.Thaw() })
	rc := replica.Client(t)
	require.Eventually(t, func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "role:master")
	}, 20*time.Second, 50*time.Millisecond, "the replica never took over")
	// Two health intervals (5 s each) at most, and a reroute turn.
	pushedAt(t, replica.Addr, ch, sub, 15*time.Second)
}

package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
)

// TestCluster: on a Redis Cluster of three masters, list scans every
// master, and inspect, force-unlock and run reach each lock's node.
func TestCluster(t *testing.T) {
	redistest.Parallel(t)
	if testing.Short() {
		t.Skip("a new cluster takes 2s to accept writes")
	}
	addrs := startCluster(t, 3)
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	c := relock.New(rdb)
	t.Cleanup(func() { c.Close() })

	// Enough names to land on every master.
	prefix := redistest.Name(t)
	var names []string
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("%s.%d", prefix, i)
		names = append(names, name)
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		t.Cleanup(func() { _ = m.Unlock(ctx) })
	}
	re := reentrant.New(c, names[0])
	require.NoError(t, re.Lock(ctx))
	rw := rwlock.New(c, names[1])
	require.NoError(t, rw.RLock(ctx))
	t.Cleanup(func() { _ = rw.RUnlock(ctx) })
	masters := map[string]bool{}
	for _, n := range names {
		masters[nodeOf(t, rdb, "relock:mutex:{"+n+"}")] = true
	}
	require.Len(t, masters, 3, "the names do not cover every master")

	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a
	}
	for _, flags := range [][]string{{"-redis", strings.Join(urls, ",")}, {"-cluster", "-redis", urls[0]}} {
		r := relockCmd(t, "", append(flags, "-json", "list", prefix+".*")...)
		require.Equal(t, 0, r.code)
		_, locks := jsonLines(t, r.stdout)
		require.Len(t, locks, len(names)+2)
		var got []string
		for _, l := range locks {
			got = append(got, l.Kind+" "+l.Name)
		}
		assert.Contains(t, got, "reentrant "+names[0])
		assert.Contains(t, got, "rwlock "+names[1])
		for _, n := range names {
			assert.Contains(t, got, "mutex "+n)
		}
	}

	r := relockCmd(t, "", "-redis", strings.Join(urls, ","), "inspect", names[1])
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, `rwlock "`+names[1]+`": read`)
	r = relockCmd(t, "", "-redis", strings.Join(urls, ","), "-yes", "force-unlock", names[0])
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, `deleted mutex "`+names[0]+`"`)
	assert.Contains(t, r.stdout, `deleted reentrant "`+names[0]+`"`)

	// run holds its mutex, or a semaphore's permit, on the lock's node.
	for _, n := range []string{"1", "2"} {
		args := append([]string{"-redis", strings.Join(urls, ","), "run", "-n", n, prefix + ".run", "--"}, childArgs(t, "env")...)
		r = relockProc(t, args...)
		require.Equal(t, 0, r.code)
		fence := map[string]string{"1": "1", "2": ""}[n]
		assert.Equal(t, "RELOCK_NAME="+prefix+".run\nRELOCK_FENCE="+fence+"\n", r.stdout)
	}
}

// nodeOf returns the address of the master that holds key's slot.
func nodeOf(t *testing.T, rdb *redis.ClusterClient, key string) string {
	t.Helper()
	slot, err := rdb.ClusterKeySlot(context.Background(), key).Result()
	require.NoError(t, err)
	slots, err := rdb.ClusterSlots(context.Background()).Result()
	require.NoError(t, err)
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			return s.Nodes[0].Addr
		}
	}
	t.Fatalf("no node for slot %d", slot)
	return ""
}

// startCluster starts n redis-servers as a Redis Cluster of n masters,
// stopped at the end of t, and returns their addresses. Like
// redistest.Real, it skips t when there is no redis-server, unless
// RELOCK_REQUIRE_REDIS=1. (The nodes are joined by hand, which is faster
// than redis-cli --cluster create.)
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	var addrs, buses []string
	var nodes []*redis.Client
	for i := 0; i < n; i++ {
		// The cluster bus port defaults to port+10000, which may not exist.
		l, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for the server to bind
		require.NoError(t, err)
		_, bus, _ := net.SplitHostPort(l.Addr().String())
		require.NoError(t, l.Close())
		s := redistest.StartServer(t, "--cluster-enabled", "yes", "--cluster-port", bus)
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { c.Close() })
		addrs, buses, nodes = append(addrs, s.Addr), append(buses, bus), append(nodes, c)
	}
	const slots = 16384
	for i, c := range nodes {
		require.NoError(t, c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err())
		require.NoError(t, c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*slots/n, (i+1)*slots/n-1).Err())
	}
	for i := 1; i < n; i++ {
		host, port, _ := net.SplitHostPort(addrs[i])
		require.NoError(t, nodes[0].Do(ctx, "CLUSTER", "MEET", host, port, buses[i]).Err())
	}
	require.Eventually(t, func() bool {
		for _, c := range nodes {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r") {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the cluster never became ready")
	return addrs
}

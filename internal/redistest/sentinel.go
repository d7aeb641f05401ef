package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which a Sentinel group's Sentinels
// watch its master.
const SentinelMaster = "relock"

// Sentinel is a master with one replica, watched by three Redis Sentinels
// that fail it over one second after it stops answering (quorum 2; a
// failed election is tried again 6 s later), all real servers of one test
// on loopback ports.
type Sentinel struct {
	Master, Replica *Managed
	// Addrs are the Sentinels' addresses.
	Addrs []string
}

// StartSentinel starts a Sentinel group of t's own, waits until every
// Sentinel knows the replica and the two other Sentinels (what a failover
// needs), and stops it at the end of t. It skips t under -short (CI's
// second pass) and, like Real, when no redis-server can be had (failing
// t with RELOCK_REQUIRE_REDIS=1).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no Sentinel")
	}
	// No delay before the first sync (Redis waits 5 s for more replicas).
	master := StartManaged(t, "", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	replica := StartManaged(t, "", "--replicaof", host, port)
	g := &Sentinel{Master: master, Replica: replica}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := master.Node(t)
	if err := poll(ctx, func() bool {
		return strings.Contains(mc.Info(ctx, "replication").Val(), "state=online")
	}); err != nil {
		t.Fatalf("the replica never came online: %v", err)
	}
	for i := 0; i < 3; i++ {
		addr, err := launchSentinel(t, master.Addr)
		if err != nil {
			unavailable(t, err)
		}
		g.Addrs = append(g.Addrs, addr)
	}
	for _, addr := range g.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		defer sc.Close()
		if err := poll(ctx, func() bool {
			m, err := sc.Master(ctx, SentinelMaster).Result()
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		}); err != nil {
			t.Fatalf("sentinel %s never saw the replica and the other sentinels: %v", addr, err)
		}
	}
	return g
}

// launchSentinel starts one Sentinel of the master at addr, stopped at the
// end of t. A Sentinel rewrites its configuration file: each has its own.
func launchSentinel(t testing.TB, master string) (string, error) {
	dir := t.TempDir()
	host, port, _ := strings.Cut(master, ":")
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 3000\n", SentinelMaster, host, port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return "", err
	}
	cmd, addr, err := launchOn(dir, nil, func(port int) []string {
		return []string{conf, "--sentinel", "--port", strconv.Itoa(port)}
	})
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { stop(cmd) })
	return addr, nil
}

// Client returns a go-redis failover client of the group (it asks the
// Sentinels for the master, and follows a failover), closed at the end
// of t.
func (g *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: g.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// WaitMaster waits until the first Sentinel names addr as the master, for
// at most d.
func (g *Sentinel) WaitMaster(ctx context.Context, addr string, d time.Duration) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: g.Addrs[0]})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var got []string
	err := poll(ctx, func() bool {
		got, _ = sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		return len(got) == 2 && net.JoinHostPort(got[0], got[1]) == addr
	})
	if err != nil {
		return fmt.Errorf("the sentinels never named %s the master (last: %v): %w", addr, got, err)
	}
	return nil
}

package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of real redis-servers on loopback ports:
// masters with one replica each, the slots spread evenly over the
// masters. Build it with RealCluster (the test binary's, shared) or
// StartCluster (a test's own, which it may break).
type Cluster struct {
	// Nodes are the cluster's servers: the masters first, then their
	// replicas in the same order, as they were built (a failover swaps
	// roles; ask the cluster, not this slice, who is master now).
	Nodes []*ClusterNode

	dir string
}

// ClusterNode is one server of a Cluster: a Managed server (Crash, Start
// again with its cluster configuration: a former master comes back as a
// replica of the node that took over) with its cluster id.
type ClusterNode struct {
	*Managed
	ID string

	bus int // cluster bus port
}

// nodeTimeout is the cluster-node-timeout of the shared cluster: long
// enough that a test binary under -race on two cores never sees a
// spurious failover.
const nodeTimeout = 5 * time.Second

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
)

// RealCluster returns the test binary's cluster (three masters, one
// replica each), starting it on first use; Main stops it. It skips t (or
// fails it, with RELOCK_REQUIRE_REDIS=1) when no cluster can be had.
func RealCluster(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	clusterOnce.Do(formCluster)
	if clusterErr != nil {
		unavailable(t, clusterErr)
	}
	return cluster
}

// formCluster starts the binary's cluster (RealCluster).
func formCluster() {
	if cluster, clusterErr = startCluster(3, nodeTimeout); clusterErr == nil {
		for _, n := range cluster.Nodes {
			addShared(n.Addr)
		}
	}
}

// StartCluster starts a cluster of t's own, with masters masters and one
// replica each and the given cluster-node-timeout (how soon a dead master
// is failed over), and stops it at the end of t.
func StartCluster(t testing.TB, masters int, timeout time.Duration) *Cluster {
	t.Helper()
	skipShort(t)
	c, err := startCluster(masters, timeout)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(c.Stop)
	return c
}

// skipShort skips t with -short: CI's second pass (the newest go-redis)
// runs the suites on single servers only.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no Redis Cluster")
	}
}

// Client returns a go-redis cluster client, closed at the end of t. opts
// may adjust its options.
func (c *Cluster) Client(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Addrs are the addresses of every node.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Stop kills every node and removes their files.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		_ = n.Crash()
	}
	_ = os.RemoveAll(c.dir)
}

func startCluster(masters int, timeout time.Duration) (_ *Cluster, err error) {
	dir, err := os.MkdirTemp("", "relock-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for i := 0; i < 2*masters; i++ {
		ndir := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(ndir, 0o700); err != nil {
			return nil, err
		}
		// The bus port defaults to port+10000, which an ephemeral port
		// may push past 65535: give it a free port of its own (another
		// one if another process took it before the server could).
		var (
			bus  int
			args []string
			cmd  *exec.Cmd
			addr string
		)
		for try := 0; ; try++ {
			if bus, err = freePort(); err != nil {
				return nil, err
			}
			args = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", strconv.Itoa(int(timeout.Milliseconds())),
				"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
			if cmd, addr, err = launch(ndir, args...); err == nil {
				break
			}
			if try == 2 {
				return nil, err
			}
			_ = os.Remove(filepath.Join(ndir, "nodes.conf")) // of the server that did not start
		}
		m := &Managed{Server: Server{Addr: addr}, dir: ndir, args: args, log: filepath.Join(ndir, "redis.log"), cmd: cmd}
		c.Nodes = append(c.Nodes, &ClusterNode{Managed: m, bus: bus})
	}
	if err := c.form(masters); err != nil {
		return nil, fmt.Errorf("forming a cluster: %w", err)
	}
	return c, nil
}

// form gives each master an even share of the slots, introduces every
// node to the first, makes the others replicas, and waits until every
// node sees the cluster up with all its replicas in sync (what redis-cli
// --cluster create does, without its fixed waits).
func (c *Cluster) form(masters int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer clients[i].Close()
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return err
		}
		n.ID = id
	}
	const slots = 16384
	for i := 0; i < masters; i++ {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return err
		}
		// Distinct epochs: no collision to resolve after the meet.
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return err
		}
	}
	host, port, _ := strings.Cut(c.Nodes[0].Addr, ":")
	for _, cl := range clients[1:] {
		// The bus port too: MEET assumes port+10000 without it.
		if err := cl.Do(ctx, "CLUSTER", "MEET", host, port, c.Nodes[0].bus).Err(); err != nil {
			return err
		}
	}
	if err := poll(ctx, func() bool {
		for _, cl := range clients {
			if !strings.Contains(cl.ClusterInfo(ctx).Val(), "cluster_known_nodes:"+strconv.Itoa(len(clients))) {
				return false
			}
		}
		return true
	}); err != nil {
		return errors.New("nodes never met")
	}
	for i := masters; i < len(clients); i++ {
		if err := clients[i].Do(ctx, "CLUSTER", "REPLICATE", c.Nodes[i-masters].ID).Err(); err != nil {
			return err
		}
	}
	return poll(ctx, func() bool {
		for i, cl := range clients {
			if !strings.Contains(cl.ClusterInfo(ctx).Val(), "cluster_state:ok") {
				return false
			}
			if i >= masters && !strings.Contains(cl.Info(ctx, "replication").Val(), "master_link_status:up") {
				return false
			}
		}
		return true
	})
}

// poll calls ok every 20 ms until it returns true or ctx ends.
func poll(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// clusterOptions are the options of a client of c with the settings of o
// that a cluster client shares (credentials, TLS, timeouts, retries, the
// dialer).
func clusterOptions(c *Cluster, o *redis.Options) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:           c.Addrs(),
		ClientName:      o.ClientName,
		Username:        o.Username,
		Password:        o.Password,
		TLSConfig:       o.TLSConfig,
		Protocol:        o.Protocol,
		MaxRetries:      o.MaxRetries,
		MinRetryBackoff: o.MinRetryBackoff,
		MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout:     o.DialTimeout,
		ReadTimeout:     o.ReadTimeout,
		WriteTimeout:    o.WriteTimeout,
		PoolSize:        o.PoolSize,
		Dialer:          o.Dialer,
	}
}

// Migrate moves slot from the master from to the master to as redis-cli
// --cluster reshard does: BeginMigration, then FinishMigration.
func Migrate(ctx context.Context, slot int64, from, to *ClusterNode, pause time.Duration) error {
	if err := BeginMigration(ctx, slot, from, to); err != nil {
		return err
	}
	return FinishMigration(ctx, slot, from, to, pause)
}

// BeginMigration marks slot as migrating from the master from to the
// master to (CLUSTER SETSLOT IMPORTING at the destination, then MIGRATING
// at the source), and moves no key: commands on keys the source still
// has are served there, others are redirected (ASK) or refused
// (TRYAGAIN).
func BeginMigration(ctx context.Context, slot int64, from, to *ClusterNode) error {
	src, dst := nodeClient(from), nodeClient(to)
	defer src.Close()
	defer dst.Close()
	// Right after a move, a master may for a moment take an older claim
	// of the slot from the other's gossip ("I'm not the owner of hash
	// slot"), until the newer epoch reaches it.
	for tries := 0; ; tries++ {
		err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.ID).Err()
		if err == nil {
			err = src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.ID).Err()
		}
		if err == nil || tries == 50 || !strings.Contains(err.Error(), "not the owner") {
			return err
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// FinishMigration moves the keys of slot, which BeginMigration marked,
// with MIGRATE one at a time (pause between two, to hold the slot
// half-moved), until the source has none left (keys created meanwhile are
// created at the destination), then both masters give the slot to the
// destination; the other nodes learn it from them.
func FinishMigration(ctx context.Context, slot int64, from, to *ClusterNode, pause time.Duration) error {
	src, dst := nodeClient(from), nodeClient(to)
	defer src.Close()
	defer dst.Close()
	host, port, _ := strings.Cut(to.Addr, ":")
	for {
		keys, err := src.Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 100).StringSlice()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		for _, key := range keys {
			// A key gone meanwhile (expired, deleted) replies +NOKEY.
			if err := src.Do(ctx, "MIGRATE", host, port, key, 0, 5000).Err(); err != nil {
				return fmt.Errorf("MIGRATE %s: %w", key, err)
			}
			if err := sleep(ctx, pause); err != nil {
				return err
			}
		}
	}
	// The destination claims the slot with its config epoch, bumped by
	// SETSLOT NODE only when it is not the greatest it knows. Had it not
	// yet heard of the source's epoch, a ping the source sent before it
	// gave the slot away would carry a greater epoch and take the slot
	// back to the source, which no longer claims it: each would send
	// clients to the other, for good (redis-server 7.0, seen in CI).
	if err := awaitEpoch(ctx, src, dst); err != nil {
		return err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to.ID).Err(); err != nil {
		return err
	}
	return src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to.ID).Err()
}

// awaitEpoch waits until dst's current epoch is at least src's config
// epoch (the cluster bus carries it, in a second at most).
func awaitEpoch(ctx context.Context, src, dst *redis.Client) error {
	want, err := infoField(ctx, src, "cluster_my_epoch")
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := infoField(ctx, dst, "cluster_current_epoch")
		if err != nil || got >= want {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the destination's epoch %d stays below the source's %d", got, want)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// infoField reads a number of CLUSTER INFO.
func infoField(ctx context.Context, c *redis.Client, field string) (int64, error) {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("CLUSTER INFO has no %s", field)
}

func nodeClient(n *ClusterNode) *redis.Client { return redis.NewClient(&redis.Options{Addr: n.Addr}) }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

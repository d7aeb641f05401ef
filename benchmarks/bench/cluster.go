package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster that the cluster kinds (-cluster) run on,
// through go-redis cluster clients.
type Cluster struct {
	opts    *redis.ClusterOptions
	masters []string // the masters' addresses, as the cluster gave them
	version string
}

// clusterSuffix ends the name of a relock kind run on the cluster:
// relock/mutex@cluster is relock/mutex on a *redis.ClusterClient.
const clusterSuffix = "@cluster"

// dialCluster connects to the Redis Cluster whose nodes (some or all of
// them) are the comma-separated list, URLs or host:port as for -redlock:
// a URL's credentials and TLS settings are those of every node. It
// checks that the cluster is up and pings every master.
func dialCluster(list string) (*Cluster, error) {
	opts := &redis.ClusterOptions{}
	for i, u := range splitList(list) {
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("-cluster: address %d: %w", i+1, err) // not the URL: it may hold a password
		}
		if i == 0 {
			opts.Username, opts.Password, opts.TLSConfig = o.Username, o.Password, o.TLSConfig
		}
		if !slices.Contains(opts.Addrs, o.Addr) {
			opts.Addrs = append(opts.Addrs, o.Addr)
		}
	}
	if len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("-cluster: no address")
	}
	c := &Cluster{opts: opts, version: "redis"}
	rdb := c.NewRedis(nil)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("-cluster: CLUSTER INFO on %s: %w", opts.Addrs[0], err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return nil, fmt.Errorf("-cluster: the cluster at %s is not up (cluster_state is not ok)", opts.Addrs[0])
	}
	var mu sync.Mutex
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("ping %s: %w", m.Options().Addr, err)
		}
		v := serverVersion(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		c.masters, c.version = append(c.masters, m.Options().Addr), v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-cluster: %w", err)
	}
	slices.Sort(c.masters)
	return c, nil
}

// Masters is the number of the cluster's masters.
func (c *Cluster) Masters() int { return len(c.masters) }

// Describe names the cluster for reports, e.g. "redis 7.0.15 cluster of
// 3 masters at 127.0.0.1:7001, ...".
func (c *Cluster) Describe() string {
	return fmt.Sprintf("%s cluster of %d masters at %s", c.version, len(c.masters), strings.Join(c.masters, ", "))
}

// NewRedis returns a go-redis cluster client on c whose commands are
// counted by cnt (which may be nil). The hook sees each command once, at
// the cluster client, redirections included.
func (c *Cluster) NewRedis(cnt *Counter) *redis.ClusterClient {
	o := *c.opts
	o.Addrs = slices.Clone(c.opts.Addrs)
	rdb := redis.NewClusterClient(&o)
	if cnt != nil {
		rdb.AddHook(cnt.Hook())
	}
	return rdb
}

// clusterKinds returns relock's kinds among kinds on the cluster c, each
// named after its kind with clusterSuffix. Peers have no cluster kind.
func clusterKinds(kinds []Kind, c *Cluster) []Kind {
	var out []Kind
	for _, k := range kinds {
		if k.newLock == nil || k.Cluster != nil {
			continue
		}
		ck := relockKind(k.Name+clusterSuffix, k.newLock, func(_ *Server, cnt *Counter) redis.UniversalClient { return c.NewRedis(cnt) })
		ck.Cluster = c
		ck.Note = fmt.Sprintf("%s on a go-redis ClusterClient (%d masters): defaults, wake-ups by SPUBLISH/SSUBSCRIBE on each master",
			k.Name, c.Masters())
		out = append(out, ck)
	}
	return out
}

// clusterMasters is the number of masters of k's cluster, 0 for a kind
// on one server.
func (k Kind) clusterMasters() int {
	if k.Cluster == nil {
		return 0
	}
	return k.Cluster.Masters()
}

// singleKind is the single-server kind that a cluster kind runs on the
// cluster, or "" for a kind that is not a cluster kind.
func singleKind(r *Result) string {
	if r.Cluster == 0 {
		return ""
	}
	return strings.TrimSuffix(r.Kind, clusterSuffix)
}

// serverVersion is "redis X.Y.Z" as the server at c says, or "redis".
func serverVersion(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "redis"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "redis " + v
		}
	}
	return "redis"
}

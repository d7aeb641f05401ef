package notify

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// router says which pub/sub connection a channel needs. A Ring publishes a
// release's wake-up on the shard of the lock's keys, which share the
// channel's {hash tag}: the hub keeps one connection per shard and
// computes a channel's shard as the Ring routes its keys (internal/shard).
// On a Cluster the scripts publish with SPUBLISH, which only the master
// of the channel's slot (the lock's) delivers: the hub keeps one sharded
// connection per master, named by the master's address. A single server
// needs one connection for all channels.
type router struct {
	ring    *shard.Ring          // nil when not a Ring
	cluster *redis.ClusterClient // nil when not a Cluster
}

func newRouter(rdb redis.UniversalClient) router {
	if ring, ok := rdb.(*redis.Ring); ok && ring != nil {
		return router{ring: shard.NewRing(ring)}
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok && cc != nil {
		return router{cluster: cc}
	}
	return router{}
}

// route returns the name of the connection channel needs: on a Cluster
// the address of the master of its slot, as the client's cluster state
// has it (which it may have to load first); elsewhere as of says.
func (r router) route(ctx context.Context, channel string) (string, error) {
	if r.cluster == nil {
		return r.of(channel), nil
	}
	m, err := r.cluster.MasterForKey(ctx, channel)
	if err != nil {
		return "", err
	}
	return m.Options().Addr, nil
}

// of returns the name of the Ring shard channel is published on, "" off
// a Ring.
func (r router) of(channel string) string {
	if r.ring == nil {
		return ""
	}
	return r.ring.Get(channel)
}

// state says whether the Ring routes channels as of says (always Exact
// off a Ring). Only with Exact may a new connection be opened: the Ring
// opens it on the shard of its first channel, and with a shard down that
// may be another shard than the computed one, where it would stay. With
// Changed, no channel is subscribed at all.
func (r router) state() shard.State {
	if r.ring == nil {
		return shard.Exact
	}
	return r.ring.State()
}

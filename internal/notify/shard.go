package notify

import (
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// router says which pub/sub connection a channel needs. A Ring publishes a
// release's wake-up on the shard of the lock's keys, which share the
// channel's {hash tag}: the hub keeps one connection per shard and
// computes a channel's shard as the Ring routes its keys (internal/shard).
// A Cluster (classic PUBLISH is broadcast to every node) and a single
// server need one connection for all channels.
type router struct {
	ring *shard.Ring // nil when not a Ring
}

func newRouter(rdb redis.UniversalClient) router {
	if ring, ok := rdb.(*redis.Ring); ok && ring != nil {
		return router{ring: shard.NewRing(ring)}
	}
	return router{}
}

// of returns the name of the shard channel is published on, "" off a Ring.
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

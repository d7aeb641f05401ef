package notify

import (
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// router says which pub/sub connection a channel needs. A Ring publishes a
// release's wake-up on the shard of the lock's keys, which share the
// channel's {hash tag}; a Cluster (classic PUBLISH is broadcast to every
// node) and a single server need one connection for all channels.
type router struct {
	ring   *redis.Ring                 // nil when not a Ring
	shards int                         // shards in the Ring's options
	hash   func(channel string) string // shard name of a channel
}

func newRouter(rdb redis.UniversalClient) router {
	ring, ok := rdb.(*redis.Ring)
	if !ok || ring == nil {
		return router{hash: func(string) string { return "" }}
	}
	opt := ring.Options()
	if opt.NewConsistentHash == nil {
		// NewRing always sets it; without it there is no way to know the
		// Ring's routing, so every channel shares one connection.
		return router{hash: func(string) string { return "" }}
	}
	names := make([]string, 0, len(opt.Addrs))
	for name := range opt.Addrs {
		names = append(names, name)
	}
	sort.Strings(names)
	// The Ring does the same over its live shards; with every shard up
	// (see open) the two agree.
	h := opt.NewConsistentHash(names)
	return router{
		ring:   ring,
		shards: len(names),
		hash:   func(channel string) string { return h.Get(hashTag(channel)) },
	}
}

// allUp reports whether every shard of the Ring is up, so that the Ring
// routes a channel where hash says. It is always true off a Ring.
func (r router) allUp() bool {
	return r.ring == nil || r.ring.Len() >= r.shards
}

// hashTag returns what go-redis hashes to route key: the content of its
// first {...} when non-empty, else the whole key (as go-redis's
// internal/hashtag.Key).
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

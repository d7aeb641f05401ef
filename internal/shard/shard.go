// Package shard computes where a go-redis Ring sends a key, so that work on
// many keys (wake-up subscriptions, renewals) can be grouped by the shard
// that serves them.
//
// A Ring hashes a key's hash tag (Tag) with its consistent hash over the
// names of its live shards. Ring computes the same over the shard names of
// the Ring's options: it agrees with the Ring while exactly those shards
// are live (State Exact). With some of them down (Degraded) the Ring
// reroutes the keys of the down shards and, with a consistent hash such as
// go-redis's default (rendezvous), keeps every other key where Ring.Get
// says. After Ring.SetAddrs the options no longer name the Ring's shards:
// a live shard at an address the options do not have (or more live shards
// than the options name) makes the State Changed, and Get may then be
// wrong for any key. A SetAddrs that only renames shards, keeping their
// addresses, is not detected.
package shard

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// State says how far Ring.Get agrees with the Ring's routing.
type State int

const (
	// Exact: every shard of the Ring's options is live and no other is;
	// the Ring sends every key where Get says.
	Exact State = iota
	// Degraded: some shards of the options are down (or were removed by
	// SetAddrs) and no other shard is live. The Ring reroutes the keys
	// that Get puts on a down shard; with a consistent hash the others
	// stay where Get says.
	Degraded
	// Changed: the Ring has a live shard that its options do not name
	// (SetAddrs added or replaced one), or its routing cannot be computed:
	// Get may be wrong for any key.
	Changed
)

// recheck is how long a check of the Ring's shard addresses (which asks
// every live shard's client for its address) is trusted.
const recheck = 100 * time.Millisecond

// Ring computes the routing of one go-redis Ring. Its methods are safe for
// concurrent use.
type Ring struct {
	ring  *redis.Ring
	names int                  // shards in the Ring's options
	addrs map[string]bool      // their addresses
	hash  redis.ConsistentHash // over their names; nil if unknown

	mu      sync.Mutex
	checked time.Time // when foreign was last computed
	foreign bool      // a live shard had an address not in addrs
}

// NewRing returns the routing of ring as its options describe it.
func NewRing(ring *redis.Ring) *Ring {
	opt := ring.Options()
	r := &Ring{ring: ring, names: len(opt.Addrs), addrs: make(map[string]bool, len(opt.Addrs))}
	names := make([]string, 0, len(opt.Addrs))
	for name, addr := range opt.Addrs {
		names = append(names, name)
		r.addrs[addr] = true
	}
	// The Ring hashes over its live shard names in map order; sorting
	// only makes ties (if a hash had any) deterministic.
	sort.Strings(names)
	if opt.NewConsistentHash != nil { // NewRing always sets it
		r.hash = opt.NewConsistentHash(names)
	}
	return r
}

// Get returns the name of the shard the Ring sends key to while every
// shard of its options is up (see State), or "" if that is unknown.
func (r *Ring) Get(key string) string {
	if r.hash == nil {
		return ""
	}
	return r.hash.Get(Tag(key))
}

// State says whether the Ring routes keys as Get says now. It reads the
// Ring's count of live shards on every call and checks their addresses at
// most every 100 ms, so a SetAddrs may go unnoticed for that long. The
// Ring's routing may change right after State returns (a shard voted down
// or up by its heartbeat), so callers must cope with a stale answer.
func (r *Ring) State() State {
	if r.hash == nil {
		return Changed
	}
	n := r.ring.Len()
	if n > r.names || r.foreignShard() {
		return Changed
	}
	if n < r.names {
		return Degraded
	}
	return Exact
}

// foreignShard reports whether a live shard of the Ring has an address
// that its options do not have, as of a check at most recheck old.
func (r *Ring) foreignShard() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= recheck {
		var mu sync.Mutex
		foreign := false
		// fn only reads options: no I/O. The error is fn's, never set.
		_ = r.ring.ForEachShard(context.Background(), func(_ context.Context, c *redis.Client) error {
			if !r.addrs[c.Options().Addr] {
				mu.Lock()
				foreign = true
				mu.Unlock()
			}
			return nil
		})
		r.foreign, r.checked = foreign, now
	}
	return r.foreign
}

// Tag returns what go-redis hashes to route key, on a Ring as on a
// Cluster: the content of its first {...} when non-empty, else the whole
// key (as go-redis's internal/hashtag.Key).
func Tag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

package watchdog

import (
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// shardKey returns what decides which server rdb sends a key to, so that a
// round groups holds into one script call per server (BatchSize holds per
// call): the cluster slot on a ClusterClient, nothing on a single server,
// and on a Ring the shard the Ring routes the key to, computed as
// internal/shard does (the Ring's consistent hash over its shard names,
// applied to the key's hash tag).
//
// The Ring routes a script call by its first key, and a shard, being a
// single server, runs it on every key it is given, without checking where
// the Ring would have routed them. So a call only groups keys by computed
// shard while the computation agrees with the Ring (shard.Exact: every
// shard of the Ring's options up, no other). Otherwise (a shard down, or
// shards changed by SetAddrs) keys are grouped by hash tag, one call per
// tag, and every key goes where the Ring routes it, as if sent alone.
//
// What if the Ring's routing changes between the grouping and the call (a
// shard voted down or up; SetAddrs, seen within 100 ms)? The call goes to
// the shard the Ring now picks for its first key and may carry keys that
// the Ring now routes elsewhere. Renewal never creates a key, so on that
// shard such a key is only extended if it exists there with the owner's
// token: the owner acquired it there under an earlier routing, and another
// owner may already take the lock on the shard the Ring routes it to now.
// Renewed alone, that hold would have been found lost in this round; here
// it is renewed once more, on a shard the Ring no longer sends the lock's
// commands to, and found lost one round later (the next round groups by
// hash tag, or by a computation that agrees with the Ring again).
func shardKey(rdb redis.UniversalClient) func(key string) string {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return func(key string) string { return strconv.Itoa(int(Slot(key))) }
	case *redis.Ring:
		r := shard.NewRing(c)
		return func(key string) string {
			// Prefixed so that a shard name never meets a hash tag.
			if r.State() == shard.Exact {
				return "s:" + r.Get(key)
			}
			return "t:" + shard.Tag(key)
		}
	}
	return func(string) string { return "" }
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, or of the whole key when it has no non-empty tag, modulo 16384.
func Slot(key string) uint16 {
	return crc16(shard.Tag(key)) % 16384
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

package watchdog

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// shardKey returns what decides which server rdb sends a key to: the
// cluster slot on a ClusterClient, the hash tag itself on a Ring (which
// hashes the tag, not the slot), and nothing on a single server.
func shardKey(rdb redis.UniversalClient) func(string) string {
	switch rdb.(type) {
	case *redis.ClusterClient:
		return func(key string) string { return strconv.Itoa(int(Slot(key))) }
	case *redis.Ring:
		return tag
	}
	return func(string) string { return "" }
}

// tag returns key's hash tag, or the whole key when it has none.
func tag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, or of the whole key when it has no non-empty tag, modulo 16384.
func Slot(key string) uint16 {
	return crc16(tag(key)) % 16384
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

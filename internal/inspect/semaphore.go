package inspect

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// semaphoreLayout: package semaphore keeps a hash relock:semaphore:{name}
// with "permits" (the capacity), "used" (permits held in all) and each
// owner's permits under its token, and a sorted set
// relock:semaphore:{name}:owners of owner -> server time (ms) at which its
// permits lapse, absent while one holder took them uncontended ("solo":
// its permits lapse with the hash; see soloOwner). Its waiters are queued
// (see queue.go); an entry's last field is the permits it asks for.
var semaphoreLayout = layout{
	kind:         "semaphore",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append([]string{k.Lock, k.Sub("owners")}, queueKeys(k)...)
	},
	script: redis.NewScript(queueLua + `
-- inspect semaphore: a snapshot of a semaphore (read-only).
--
-- KEYS[1] hash (permits, used, <token> -> permits held)
-- KEYS[2] owners (sorted set owner -> expiry, server ms)
-- KEYS[3], KEYS[4] queue and waiter deadlines
--
-- Reply: {TIME seconds, TIME microseconds, HGETALL of the hash, PTTL of
-- the hash, owners with their expiries, read_queue(3)}
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]),
  redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), read_queue(3)}
`),
	decode: decodeSemaphore,
}

func decodeSemaphore(name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 6)
	if err != nil {
		return Lock{}, false, err
	}
	now, err := serverMs(a[0], a[1])
	if err != nil {
		return Lock{}, false, err
	}
	held := map[string]int{}
	l := Lock{Kind: "semaphore", Name: name, TTL: ttl(a[3]), Owners: []Owner{}}
	meta := metadata(replyPairs(a[2]))
	for _, p := range replyPairs(a[2]) {
		n, _ := strconv.Atoi(p[1])
		switch {
		case p[0] == "permits":
			l.Permits = n
		case p[0] == "used", strings.HasSuffix(p[0], metaSuffix):
		default:
			held[p[0]] = n
		}
	}
	for _, p := range soloOwner(replyPairs(a[4]), a[3], now, keysOf(held)) {
		exp, err := strconv.ParseFloat(p[1], 64)
		if err != nil || int64(exp) <= now || held[p[0]] == 0 {
			continue // lapsed: no longer counts, taken back by the next call
		}
		l.Owners = append(l.Owners, Owner{Fingerprint: core.Fingerprint(p[0]), Count: held[p[0]], Expires: ms(int64(exp) - now),
			Metadata: meta[p[0]]})
		l.addToken(p[0])
		l.Used += held[p[0]]
	}
	sortOwners(l.Owners)
	l.Held = len(l.Owners) > 0
	l.Queue = decodeQueue(a[5], now, true)
	if !l.Held && len(l.Queue) == 0 {
		return Lock{}, false, nil
	}
	return l, true, nil
}

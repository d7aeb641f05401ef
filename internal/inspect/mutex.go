package inspect

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// mutexLayout: package mutex keeps one string, relock:mutex:{name}, whose
// value is the owner's token, or token..":"..fence with fencing, and whose
// TTL is the lease; its waiters are queued (see queue.go).
var mutexLayout = layout{
	kind:         "mutex",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append([]string{k.Lock, k.Fence}, queueKeys(k)...)
	},
	script: redis.NewScript(queueLua + `
-- inspect mutex: a snapshot of a mutex (read-only).
--
-- KEYS[1] lock key (string: owner token, or token..":"..fence)
-- KEYS[2] fencing counter
-- KEYS[3], KEYS[4] queue and waiter deadlines
--
-- Reply: {TIME seconds, TIME microseconds, value or nil, PTTL of the lock,
-- fencing counter or nil, read_queue(3)}
local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]), read_queue(3)}
`),
	decode: decodeMutex,
}

func decodeMutex(name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 6)
	if err != nil {
		return Lock{}, false, err
	}
	now, err := serverMs(a[0], a[1])
	if err != nil {
		return Lock{}, false, err
	}
	l := Lock{Kind: "mutex", Name: name, TTL: ttl(a[3]), Owners: []Owner{}, Queue: decodeQueue(a[5], now)}
	if v, held := replyString(a[2]); held {
		l.Held = true
		l.Owners = []Owner{{Fingerprint: core.Fingerprint(mutexToken(v)), Count: 1}}
		l.setTokens([]string{mutexToken(v)})
	}
	if !l.Held && len(l.Queue) == 0 {
		return Lock{}, false, nil
	}
	l.fence(a[4])
	return l, true, nil
}

// mutexToken strips the ":fence" that follows the token with fencing.
func mutexToken(v string) string {
	i := strings.LastIndexByte(v, ':')
	if i < 0 || i == len(v)-1 {
		return v
	}
	for _, c := range v[i+1:] {
		if c < '0' || c > '9' {
			return v
		}
	}
	return v[:i]
}

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
	l := Lock{Kind: "mutex", Name: name, TTL: ttl(a[3]), Owners: []Owner{}, Queue: decodeQueue(a[5], now, false)}
	if v, held := replyString(a[2]); held {
		tok, meta := mutexValue(v)
		l.Held = true
		l.Owners = []Owner{{Fingerprint: core.Fingerprint(tok), Count: 1, Metadata: meta}}
		l.setTokens([]string{tok})
	}
	if !l.Held && len(l.Queue) == 0 {
		return Lock{}, false, nil
	}
	l.fence(a[4])
	return l, true, nil
}

// mutexValue splits a mutex's value, "<token>[:<fence>][|<metadata>]"
// (record.lua's m_value; tokens have neither ':' nor '|'), into the
// owner's token and metadata.
func mutexValue(v string) (tok, meta string) {
	tok, meta, _ = strings.Cut(v, "|")
	tok, _, _ = strings.Cut(tok, ":")
	return tok, meta
}

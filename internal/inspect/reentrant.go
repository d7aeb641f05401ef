package inspect

import (
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// reentrantLayout: package reentrant keeps one hash,
// relock:reentrant:{name}, of owner token -> hold count (and "fence", the
// hold's fencing token, with fencing), whose TTL is the lease; its
// waiters are queued (see queue.go).
var reentrantLayout = layout{
	kind:         "reentrant",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append([]string{k.Lock, k.Fence}, queueKeys(k)...)
	},
	script: hashLockScript("reentrant"),
	decode: func(name string, reply any) (Lock, bool, error) { return decodeHashLock("reentrant", name, reply) },
}

// hashLockScript reads a lock kept as a hash of owner -> count with a
// queue (reentrant, fair).
func hashLockScript(kind string) *redis.Script {
	return redis.NewScript(queueLua + `
-- inspect ` + kind + `: a snapshot of a ` + kind + ` lock (read-only).
--
-- KEYS[1] lock hash (owner token -> hold count; "fence")
-- KEYS[2] fencing counter
-- KEYS[3], KEYS[4] queue and waiter deadlines
--
-- Reply: {TIME seconds, TIME microseconds, HGETALL of the lock, PTTL of
-- the lock, fencing counter or nil, read_queue(3)}
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]), read_queue(3)}
`)
}

// decodeHashLock decodes hashLockScript's reply. A queue whose lock hash
// is gone is a free lock with waiters: the lock is between owners (or its
// waiters are dead), which is what an operator looking for a stuck lock
// wants to see.
func decodeHashLock(kind, name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 6)
	if err != nil {
		return Lock{}, false, err
	}
	now, err := serverMs(a[0], a[1])
	if err != nil {
		return Lock{}, false, err
	}
	l := Lock{Kind: kind, Name: name, TTL: ttl(a[3]), Queue: decodeQueue(a[5], now, false)}
	owners, tokens := ownerCounts(replyPairs(a[2]))
	l.Owners = owners
	l.setTokens(tokens)
	l.Held = len(l.Owners) > 0
	if !l.Held && len(l.Queue) == 0 {
		return Lock{}, false, nil
	}
	l.fence(a[4])
	return l, true, nil
}

package inspect

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// rwlockLayout: package rwlock keeps a hash, relock:rwlock:{name}, with
// "writer" (the writing owner's token, while one writes), "fence" and,
// per owner, "<token>:r" and "<token>:w" hold counts; and a sorted set
// relock:rwlock:{name}:owners of owner -> server time (ms) at which its
// holds expire (a hold counts only while that lies in the future), absent
// while one owner took it uncontended ("solo": its holds expire with the
// hash; see soloOwner). Both live as long as the longest hold. Its waiting writers are queued (see
// queue.go); waiting writers whose lock is gone are listed as a free
// rwlock with waiters, as for the fair queue.
var rwlockLayout = layout{
	kind:         "rwlock",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append([]string{k.Lock, k.Fence, k.Sub("owners")}, queueKeys(k)...)
	},
	script: redis.NewScript(queueLua + `
-- inspect rwlock: a snapshot of a read/write lock (read-only).
--
-- KEYS[1] lock hash (writer, fence, <token>:r, <token>:w)
-- KEYS[2] fencing counter
-- KEYS[3] owners (sorted set owner -> expiry, server ms)
-- KEYS[4], KEYS[5] queue of waiting writers and their deadlines
--
-- Reply: {TIME seconds, TIME microseconds, HGETALL of the lock, PTTL of
-- the lock, fencing counter or nil, owners with their expiries,
-- read_queue(4)}
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]), redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), read_queue(4)}
`),
	decode: decodeRWLock,
}

func decodeRWLock(name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 7)
	if err != nil {
		return Lock{}, false, err
	}
	now, err := serverMs(a[0], a[1])
	if err != nil {
		return Lock{}, false, err
	}
	counts := map[string]int64{} // "<token>:r" -> n
	writer := ""
	meta := metadata(replyPairs(a[2]))
	for _, p := range replyPairs(a[2]) {
		if p[0] == "writer" {
			writer = p[1]
			continue
		}
		if strings.HasSuffix(p[0], ":r") || strings.HasSuffix(p[0], ":w") {
			n, _ := strconv.ParseInt(p[1], 10, 64)
			counts[p[0]] = n
		}
	}
	l := Lock{Kind: "rwlock", Name: name, TTL: ttl(a[3]), Owners: []Owner{}}
	var toks []string
	for f := range counts {
		toks = append(toks, strings.TrimSuffix(strings.TrimSuffix(f, ":r"), ":w"))
	}
	for _, p := range soloOwner(replyPairs(a[5]), a[3], now, toks) {
		exp, err := strconv.ParseFloat(p[1], 64)
		if err != nil || int64(exp) <= now {
			continue // expired: no longer counts, dropped by the next call
		}
		tok := p[0]
		r, w := counts[tok+":r"], counts[tok+":w"]
		if r+w == 0 {
			continue
		}
		l.Owners = append(l.Owners, Owner{Fingerprint: core.Fingerprint(tok),
			Count: int(r + w), Read: int(r), Write: int(w), Expires: ms(int64(exp) - now), Metadata: meta[tok]})
		l.addToken(tok)
		if w > 0 && tok == writer {
			l.Mode = "write"
		} else if l.Mode == "" {
			l.Mode = "read"
		}
	}
	sortOwners(l.Owners)
	l.Held = len(l.Owners) > 0
	l.fence(a[4])
	l.WaitingWriters = decodeQueue(a[6], now, false)
	if !l.Held && len(l.WaitingWriters) == 0 {
		return Lock{}, false, nil
	}
	return l, true, nil
}

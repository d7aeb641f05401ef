package inspect

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// electionLayout: package election keeps a fair lock's layout
// (internal/scripts/election_common.lua): the leadership, a hash
// relock:election:{name} of the leader's owner token -> 1 with the fields
// 'fence' (the term), 'wait', 'fp', 'value', 'rev' and 'since' (TTL = the
// lease); the candidates' queue (see queue.go); and a hash
// relock:election:{name}:values of each candidate's wait id -> its
// fingerprint (8 hex digits) followed by its value. The leader's and the
// candidates' values are shown as their Metadata; Fence is the leader's
// term.
var electionLayout = layout{
	kind:         "election",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append(append([]string{k.Lock}, queueKeys(k)...), k.Sub("values"))
	},
	script: redis.NewScript(queueLua + `
-- inspect election: a snapshot of an election (read-only).
--
-- KEYS[1] the leadership (hash: leader's token -> 1, 'fence', 'wait',
--         'fp', 'value', 'rev', 'since')
-- KEYS[2], KEYS[3] the candidates' queue and deadlines
-- KEYS[4] the candidates' values (wait id -> fingerprint .. value)
--
-- Reply: {TIME seconds, TIME microseconds, HGETALL of the leadership,
-- PTTL of the leadership, read_queue(2), the value of each queued
-- candidate (nil when none)}
local t = redis.call('TIME')
local q = read_queue(2)
local vals = {}
for i, e in ipairs(q[1]) do
  local wid = string.match(e, '^[^|]*|([^|]*)')
  vals[i] = wid and redis.call('HGET', KEYS[4], wid) or false
end
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), q, vals}
`),
	decode: decodeElection,
}

// electionFields are the leadership hash's fields that are not its
// leader's token.
var electionFields = map[string]bool{"fence": true, "wait": true, "fp": true, "value": true, "rev": true, "since": true}

func decodeElection(name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 6)
	if err != nil {
		return Lock{}, false, err
	}
	now, err := serverMs(a[0], a[1])
	if err != nil {
		return Lock{}, false, err
	}
	l := Lock{Kind: "election", Name: name, TTL: ttl(a[3]), Owners: []Owner{}, Queue: decodeQueue(a[4], now, false)}
	vals, _ := a[5].([]any)
	for i := range l.Queue {
		if i < len(vals) {
			if v, ok := replyString(vals[i]); ok && len(v) >= 8 {
				l.Queue[i].Metadata = v[8:]
			}
		}
	}
	fields := map[string]string{}
	for _, p := range replyPairs(a[2]) {
		if electionFields[p[0]] {
			fields[p[0]] = p[1]
			continue
		}
		if strings.HasSuffix(p[0], metaSuffix) {
			continue
		}
		l.Owners = append(l.Owners, Owner{Fingerprint: core.Fingerprint(p[0]), Count: 1})
		l.addToken(p[0])
	}
	l.Held = len(l.Owners) > 0
	if !l.Held && len(l.Queue) == 0 {
		return Lock{}, false, nil
	}
	if l.Held {
		l.Owners[0].Metadata = fields["value"]
		if term, ok := replyInt(fields["fence"]); ok {
			l.Fence, l.HasFence = term, true
		}
	}
	return l, true, nil
}

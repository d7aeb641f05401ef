package inspect

import (
	"strconv"
	"strings"

	"github.com/relock-go/relock/internal/core"
)

// Every lock type queues its waiters the same way (internal/scripts/
// queue.lua): a sorted set relock:<kind>:{name}:queue of entries
// "<token>|<wait id>|<claim ms>|<fencing>[|<metadata>]" by arrival (a
// semaphore's fourth field is the permits asked for), and a sorted set
// relock:<kind>:{name}:timeouts of entry -> server time (ms) by which the
// waiter must show it is alive. queueLua reads both for a snapshot script
// that has the queue and the deadlines at KEYS[qi] and KEYS[qi+1]:
// read_queue(qi) returns {entries, deadline of each (nil when none)}.
const queueLua = `
local function read_queue(qi)
  local q = redis.call('ZRANGE', KEYS[qi], 0, -1)
  local dl = {}
  for i, e in ipairs(q) do
    dl[i] = redis.call('ZSCORE', KEYS[qi + 1], e)
  end
  return {q, dl}
end
`

// queueKeys are the two keys of a lock's queue.
func queueKeys(k core.Keys) []string { return []string{k.Queue, k.Timeouts} }

// decodeQueue turns read_queue's reply into waiters, head first, with
// their remaining liveness at server time now (ms) and, for a semaphore's
// queue, the permits each asks for.
func decodeQueue(v any, now int64, semaphore bool) []Waiter {
	a, _ := v.([]any)
	out := []Waiter{}
	if len(a) < 2 {
		return out
	}
	q, _ := a[0].([]any)
	dl, _ := a[1].([]any)
	for i, e := range q {
		entry, _ := replyString(e)
		f := strings.SplitN(entry, "|", 5)
		w := Waiter{Fingerprint: core.Fingerprint(f[0])}
		if len(f) == 5 {
			w.Metadata = f[4]
		}
		if semaphore && len(f) >= 4 {
			// A semaphore's entry asks for that many permits.
			w.Count, _ = strconv.Atoi(f[3])
		}
		if i < len(dl) {
			// A waiter without a deadline is dead to the scripts: Alive 0.
			if d, ok := replyInt(dl[i]); ok && d > now {
				w.Alive = ms(d - now)
			}
		}
		out = append(out, w)
	}
	return out
}

// ownerCounts turns a hash of owner token -> hold count into owners and
// their tokens, leaving out the "fence" field the exclusive locks keep
// beside them.
func ownerCounts(pairs [][2]string) ([]Owner, []string) {
	owners := pairs[:0:0]
	var tokens []string
	meta := metadata(pairs)
	for _, p := range pairs {
		if p[0] != "fence" && !strings.HasSuffix(p[0], metaSuffix) {
			owners = append(owners, p)
			tokens = append(tokens, p[0])
		}
	}
	return countOwners(owners, meta), tokens
}

// metaSuffix ends the hash field of an owner's metadata: "<token>|m"
// (relock.WithMetadata; see record.lua's set_meta).
const metaSuffix = "|m"

// metadata returns the owners' metadata among a lock hash's fields, by
// token.
func metadata(pairs [][2]string) map[string]string {
	var m map[string]string
	for _, p := range pairs {
		if tok, ok := strings.CutSuffix(p[0], metaSuffix); ok {
			if m == nil {
				m = map[string]string{}
			}
			m[tok] = p[1]
		}
	}
	return m
}

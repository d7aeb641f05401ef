package inspect

import (
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// latchLayout: package latch keeps one string, relock:latch:{name}, the
// count, with a TTL; it is gone once the count reached zero (or was never
// set).
var latchLayout = layout{
	kind: "latch",
	keys: func(k core.Keys) []string { return []string{k.Lock} },
	script: redis.NewScript(`
-- inspect latch: a snapshot of a count-down latch (read-only).
--
-- KEYS[1] latch (string: the count)
--
-- Reply: {count or nil, PTTL of the latch}
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`),
	decode: decodeLatch,
}

func decodeLatch(name string, reply any) (Lock, bool, error) {
	a, err := replyArray(reply, 2)
	if err != nil {
		return Lock{}, false, err
	}
	n, ok := replyInt(a[0])
	if !ok {
		return Lock{}, false, nil
	}
	return Lock{Kind: "latch", Name: name, Held: n > 0, TTL: ttl(a[1]), Owners: []Owner{}, Count: int(n)}, true, nil
}

package inspect

import (
	"github.com/relock-go/relock/internal/core"
)

// fairLayout: package fair keeps the reentrant hash relock:fair:{name}
// (owner token -> hold count, "fence"; TTL = lease) and queues its
// waiters (see queue.go), served strictly in queue order.
var fairLayout = layout{
	kind:         "fair",
	waitSuffixes: []string{"queue"},
	keys: func(k core.Keys) []string {
		return append([]string{k.Lock, k.Fence}, queueKeys(k)...)
	},
	script: hashLockScript("fair"),
	decode: func(name string, reply any) (Lock, bool, error) { return decodeHashLock("fair", name, reply) },
}

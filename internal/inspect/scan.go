package inspect

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// ScanCount is the COUNT hint of each SCAN call.
const ScanCount = 1000

// Scan finds the locks whose name matches pattern, a Redis glob ("*",
// "?", "[...]", "\" escapes) over lock names, and returns them sorted by
// name, then kind.
//
// It walks the keyspace with SCAN (never KEYS), COUNT ScanCount, on every
// master of a *redis.ClusterClient and every shard of a *redis.Ring,
// asking the server only for relock keys whose {name} matches. Only main
// lock keys, and the waiter keys of a lock whose main key is gone (see
// the layouts), make a lock: request records, fencing counters and other
// auxiliary keys do not.
func Scan(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]Ref, error) {
	// Every key of a lock starts with relock:<kind>:{<name>}; the server
	// filters on that, and parseKey decides exactly (the "*"s of the
	// server's pattern can reach across ":" and "}").
	match := "relock:*:{" + pattern + "}*"
	var mu sync.Mutex
	seen := map[Ref]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, ScanCount).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if r, ok := parseKey(k); ok && globMatch(pattern, r.Name) {
					seen[r] = true
				}
			}
			mu.Unlock()
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	default:
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	refs := make([]Ref, 0, len(seen))
	for r := range seen {
		refs = append(refs, r)
	}
	order := map[string]int{}
	for i, k := range Kinds {
		order[k] = i
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Name != refs[j].Name {
			return refs[i].Name < refs[j].Name
		}
		return order[refs[i].Kind] < order[refs[j].Kind]
	})
	return refs, nil
}

// parseKey returns the lock a key marks: the main key
// relock:<kind>:{<name>} of a known kind, or a waiter key
// relock:<kind>:{<name>}:<suffix> of its layout. A name may contain "}"
// and ":", but no auxiliary key ends with "}" (owner tokens are hex), so
// a key ending with "}" is a main key.
func parseKey(key string) (Ref, bool) {
	rest, ok := strings.CutPrefix(key, "relock:")
	if !ok {
		return Ref{}, false
	}
	kind, rest, ok := strings.Cut(rest, ":{")
	if !ok {
		return Ref{}, false
	}
	l := layoutOf(kind)
	if l == nil {
		return Ref{}, false
	}
	if name, ok := strings.CutSuffix(rest, "}"); ok && core.CheckName(name) == nil {
		return Ref{Kind: kind, Name: name}, true
	}
	for _, s := range l.waitSuffixes {
		if name, ok := strings.CutSuffix(rest, "}:"+s); ok && core.CheckName(name) == nil {
			return Ref{Kind: kind, Name: name}, true
		}
	}
	return Ref{}, false
}

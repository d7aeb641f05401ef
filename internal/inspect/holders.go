package inspect

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Holders returns the holders of the lock of kind and name, sorted by
// fingerprint (none when nobody holds it): one snapshot script, as Read.
func Holders(ctx context.Context, rdb redis.UniversalClient, kind, name string) ([]relock.Holder, error) {
	locks, err := Read(ctx, rdb, []Ref{{Kind: kind, Name: name}})
	if err != nil || len(locks) == 0 || !locks[0].Held {
		return []relock.Holder{}, err
	}
	l := locks[0]
	out := make([]relock.Holder, 0, len(l.Owners))
	for _, o := range l.Owners {
		h := relock.Holder{Fingerprint: o.Fingerprint, Metadata: o.Metadata, Count: o.Count,
			Read: o.Read, Write: o.Write, Lease: o.Expires}
		if kind != "rwlock" && kind != "semaphore" {
			h.Lease = l.TTL // one owner: the lock's own lease
		}
		out = append(out, h)
	}
	return out, nil
}

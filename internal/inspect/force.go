package inspect

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
)

// ForceUnlock deletes lock l (as Read, Inspect or List returned it) only
// if it is still held by exactly the owners l shows, and admits its
// waiters as the lock packages' ForceUnlock does (a semaphore's
// ForceRelease, with l's capacity). "Exactly the owners l shows" means the
// same set of owners, no more and no fewer; each may have re-entered,
// released some of its holds, or taken or given back permits meanwhile
// (see package force). It reports force.Changed, and changes nothing, when
// other owners hold the lock (some of l's released everything, or others
// joined: read it again before asking again), and force.Free when nobody
// holds it. A semaphore now in use with another capacity than l's is
// Changed too (its capacity is kept only while permits are held, so it
// was free in between). The request is applied once: a resend after a lost reply or a
// Cluster's refusal answers as its first run did. The owners' tokens go to
// Redis only, never to the caller.
func ForceUnlock(ctx context.Context, c *relock.Client, l Lock) (force.Outcome, error) {
	if l.Kind == "latch" {
		return force.Free, fmt.Errorf("force-unlock %s %q: a latch has no holders", l.Kind, l.Name)
	}
	o := core.NewOwner(c, l.Kind, l.Name, nil)
	holders := []string{} // nobody (never nil: that is "whatever the holders")
	if l.holders != nil {
		holders = append(holders, l.holders.tokens...)
	}
	out, err := force.Unlock(ctx, &o, l.Permits, holders)
	if redis.HasErrorPrefix(err, "RELOCK_CAPACITY") {
		return force.Changed, nil
	}
	if err != nil {
		return force.Free, fmt.Errorf("force-unlock %s %q: %w", l.Kind, l.Name, err)
	}
	return out, nil
}

// Package force runs relock's force-unlocks, an operator's tool: delete a
// lock (every hold of every owner of it, a semaphore's permits) and admit
// its waiters, either whatever its holders (the lock packages'
// ForceUnlock and ForceRelease) or only while they are exactly the owners
// an operator was shown (the relock command, through package inspect).
//
// Every force-unlock is idempotent: it sends a random request id, and its
// script keeps its reply for MaxRecordTTL under a record key of the
// lock's own (relock:<kind>:{name}:f:<request id>, with that TTL). A
// second run of the same request (go-redis resending it after a read
// timeout, or the handle after a Cluster refused it while its slot moved)
// answers as the first run did; it never deletes a hold taken after the
// first run, such as that of a waiter the first run woke.
//
// "The same holders" (see internal/scripts/force.lua): the same set of
// owners (handles, by owner token), each counted once, no more and no
// fewer, whatever their hold counts, read or write modes or permits now.
// An owner that re-entered, or took or gave back some permits, since it
// was shown is still the owner the operator confirmed; one that released
// everything, or a new owner, makes the holders differ. A lock's waiters
// do not count.
package force

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/scripts"
)

// Outcome is what a force-unlock did.
type Outcome int

const (
	// Free: nobody held the lock; nothing was changed.
	Free Outcome = 0
	// Deleted: the lock was deleted and its waiters admitted.
	Deleted Outcome = 1
	// Changed: other owners than those expected held the lock; nothing
	// was changed.
	Changed Outcome = -1
)

// MaxRecordTTL is how long a force-unlock's record is kept: as long as
// any request record (core.MaxRecordTTL), whatever the lease of the
// handle that sends it (a force-unlock belongs to no hold).
const MaxRecordTTL = core.MaxRecordTTL

// Unlock force-unlocks the lock of o's kind and name (mutex, reentrant,
// fair, rwlock, semaphore of capacity permits, or an election's
// leadership; o is any handle of the lock, it need not hold it). With
// holders nil it deletes the lock whatever its holders; otherwise only
// while the lock's holders are exactly the owners whose tokens holders
// lists (an empty list: nobody), and it reports Changed, changing
// nothing, when they are not. Waiters are admitted as by a release:
// woken, or granted the lock.
//
// Errors are returned as they come: o's own (Check), Redis's (a
// semaphore's capacity mismatch is the error reply "RELOCK_CAPACITY <c>"),
// or the network's. After a network error the outcome is unknown; the
// same call again is a new request, which finds the lock as it is then.
func Unlock(ctx context.Context, o *core.Owner, permits int, holders []string) (Outcome, error) {
	if err := o.Check(); err != nil {
		return Free, err
	}
	s, keys, args, err := spec(o, permits, o.Keys.Sub("f:"+requestID()))
	if err != nil {
		return Free, err
	}
	args = append(args, MaxRecordTTL.Milliseconds())
	if holders == nil {
		args = append(args, "*")
	}
	for _, h := range holders {
		args = append(args, h)
	}
	n, err := o.RunShared(ctx, s, keys, args...).Int()
	if err != nil {
		return Free, err
	}
	switch Outcome(n) {
	case Free, Deleted, Changed:
		return Outcome(n), nil
	}
	return Free, fmt.Errorf("unexpected reply %d", n)
}

// Any is Unlock whatever the holders, for the lock packages' ForceUnlock
// methods: it reports whether there was a lock to delete, and wraps an
// error as those packages do ("mutex: force-unlock "name": ...").
func Any(ctx context.Context, o *core.Owner) (bool, error) {
	out, err := Unlock(ctx, o, 0, nil)
	if err != nil {
		return false, fmt.Errorf("%s: force-unlock %q: %w", o.Kind, o.Name, err)
	}
	return out == Deleted, nil
}

// spec returns the force-unlock script of o's kind, its KEYS (with the
// request's record key rk) and its ARGV before the record TTL and the
// holders expected (see each script's header).
func spec(o *core.Owner, permits int, rk string) (*scripts.Script, []string, []any, error) {
	k := o.Keys
	switch o.Kind {
	case "mutex":
		return scripts.ForceUnlock, []string{k.Lock, rk}, []any{k.Channel, "m"}, nil
	case "reentrant":
		return scripts.ForceUnlock, []string{k.Lock, rk}, []any{k.Channel, "h"}, nil
	case "fair":
		return scripts.FairForceUnlock, []string{k.Lock, k.Fence, rk, k.Queue, k.Timeouts},
			[]any{k.WaitPrefix()}, nil
	case "rwlock":
		return scripts.RWForceUnlock,
			[]string{k.Lock, k.Fence, rk, k.Sub("owners"), k.Queue, k.Timeouts, k.Sub("readers")},
			[]any{k.Channel}, nil
	case "election":
		logTTL := max(o.Lease(), o.Heartbeat()).Milliseconds()
		return scripts.ElectionForceResign,
			[]string{k.Lock, k.Fence, rk, k.Queue, k.Timeouts, k.Sub("values"), k.Sub("log")},
			[]any{k.WaitPrefix(), k.Channel, logTTL}, nil
	case "semaphore":
		return scripts.SemForceRelease, []string{k.Lock, rk, k.Sub("owners"), k.Queue, k.Timeouts},
			[]any{permits, k.Channel}, nil
	}
	return nil, nil, nil, fmt.Errorf("no force-unlock for a %s", o.Kind)
}

// requestID returns a random request id (128 bits, hex): unique among
// every caller's force-unlocks of one lock.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

package core

import (
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
)

// LockConfig is what the relock.LockOption values set.
type LockConfig struct {
	// Lease is a fixed lease with no renewal; 0 means "use the watchdog".
	Lease time.Duration
	// Fencing makes each new hold obtain a strictly increasing token.
	Fencing bool
	// Heartbeat is how long a fair-lock waiter stays queued without
	// showing it is alive; 0 means the default.
	Heartbeat time.Duration
	// SyncReplicas is how many replicas must confirm a grant or a renewal
	// (WAIT) within SyncTimeout; 0 means none are waited for.
	SyncReplicas int
	SyncTimeout  time.Duration
	// Token is the owner token the caller chose (relock.WithToken); ""
	// means a random one.
	Token string
	// Metadata is what the owner shows others while it holds or waits
	// (relock.WithMetadata).
	Metadata string

	// Err records the first invalid option, reported by the first call.
	Err error
}

// DefaultHeartbeat is how long a waiter keeps its place in a queue unless
// it shows it is alive again (relock.WithHeartbeat).
const DefaultHeartbeat = 5 * time.Second

// StarvationThreshold is how long the longest waiter of a mutex or a
// reentrant lock may wait before releases stop letting others barge in
// and hand the lock to it directly, as sync.Mutex's starvation mode does
// after 1 ms. (The fair lock always hands the lock over.) 2 ms is about
// ten loopback round trips: a waiter behind for that long is behind because
// owners keep re-taking the lock, and handing it over (one push) is then
// also faster than waking it to try again (a push and an acquire).
//
// The scripts hold it too (handoff.lua's STARVE_MS), which a test checks.
const StarvationThreshold = 2 * time.Millisecond

// CheckLease validates a lease-like duration.
func CheckLease(what string, d time.Duration) error {
	if d < MinLease || d > MaxLease {
		return fmt.Errorf("%w: %s %v outside [%v, %v]", lockerr.InvalidOption, what, d, MinLease, MaxLease)
	}
	return nil
}

// Bounds of an owner token chosen by the caller (relock.WithToken).
const (
	MinTokenLen = 16
	MaxTokenLen = 128
)

// CheckToken validates an owner token chosen by the caller: long enough to
// be unguessable, not absurdly long, and of characters that cannot be
// confused with the separators the scripts use (':' and '|') or the
// names of a hash's own fields. The error never shows the token.
func CheckToken(tok string) error {
	if len(tok) < MinTokenLen || len(tok) > MaxTokenLen {
		return fmt.Errorf("%w: owner token of %d bytes outside [%d, %d] (it must be unguessable)",
			lockerr.InvalidOption, len(tok), MinTokenLen, MaxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if !tokenByte(tok[i]) {
			return fmt.Errorf("%w: owner token byte %d is not one of A-Z a-z 0-9 . _ ~ + / = -",
				lockerr.InvalidOption, i)
		}
	}
	return nil
}

func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '.', '_', '~', '+', '/', '=', '-':
		return true
	}
	return false
}

// MaxMetadataLen bounds relock.WithMetadata's string, in bytes: it is
// stored with every hold and queue entry of the handle.
const MaxMetadataLen = 256

// CheckMetadata validates a holder's metadata.
func CheckMetadata(m string) error {
	if len(m) > MaxMetadataLen {
		return fmt.Errorf("%w: metadata of %d bytes, longer than %d", lockerr.InvalidOption, len(m), MaxMetadataLen)
	}
	return nil
}

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 1024

// CheckName validates a lock name. A name is used verbatim inside the
// {hash tag} of every key of the lock, so it may hold any bytes except that
// it must not be empty or start with '}' (either would leave the tag empty
// and scatter the lock's keys over cluster slots).
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", lockerr.InvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", lockerr.InvalidName, len(name), MaxNameLen)
	case name[0] == '}':
		return fmt.Errorf("%w: %q starts with '}', which would empty its cluster hash tag", lockerr.InvalidName, name)
	}
	return nil
}

// Keys names the Redis keys and channel of one lock. All share the hash
// tag {name}, so they live in one cluster slot.
type Keys struct {
	Lock     string // the lock itself
	Fence    string // the fencing counter (no TTL; opt-in)
	Queue    string // waiters in arrival order (sorted set; see queue.lua)
	Timeouts string // waiters' liveness deadlines (sorted set)
	Channel  string // wake-up channel
	base     string
}

// NewKeys returns the keys of the lock of the given kind and name.
func NewKeys(kind, name string) Keys {
	base := "relock:" + kind + ":{" + name + "}"
	return Keys{Lock: base, Fence: base + ":fence", Queue: base + ":queue", Timeouts: base + ":timeouts",
		Channel: base, base: base}
}

// Sub returns an auxiliary key of the lock (same hash tag).
func (k Keys) Sub(suffix string) string { return k.base + ":" + suffix }

// WaitPrefix is the prefix of a fair-lock waiter's own wake-up channel,
// which its owner token completes (a channel, not a key).
func (k Keys) WaitPrefix() string { return k.base + ":w:" }

// Absent returns a key of the lock's slot that nothing ever creates. On a
// Redis Cluster every script that Owner.Run sends declares it: while the
// slot migrates, Redis checks the declared keys and, one of them missing,
// refuses the script before it runs (TRYAGAIN, or ASK then TRYAGAIN at
// the destination). Without it, a script whose keys all existed could
// start at the source and fail half-way, its writes so far kept, on a key
// it had emptied itself ("Script attempted to access a non local key").
// The watchdog's renewals, which only extend keys, do not declare it, so
// that they keep following a migrating slot while each of their declared
// keys is on one side; but a renewal that found the lock gone is asked
// again declaring it (see watchdog.Hold.suspect). A solo read/write
// lock's or semaphore's renewal declares its absent owners' set, and is
// refused while the slot migrates.
func (k Keys) Absent() string { return k.base + ":absent" }

// Record returns the request-record key of an owner.
func (k Keys) Record(token string) string { return k.base + ":r:" + token }

// Options converts a lock package's option values (relock.LockOption, whose
// underlying type is func(*LockConfig)) for NewOwner.
func Options[T ~func(*LockConfig)](opts []T) []func(*LockConfig) {
	out := make([]func(*LockConfig), len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

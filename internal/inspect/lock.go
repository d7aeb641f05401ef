// Package inspect reads the state of relock's locks from Redis for
// operators (the relock command): who holds a lock, how many times, for how
// long, and who waits for it.
//
// It is the one place outside the lock packages that knows how each lock
// type lays out its data, one file per type (mutex.go, reentrant.go,
// fair.go, rwlock.go, semaphore.go, latch.go, election.go): the keys, a read-only Lua script that returns all of
// them in one consistent snapshot (with the server's TIME where deadlines
// are kept in server time), and the decoding of its reply. When a lock
// type's layout changes, its file here is what changes.
//
// A snapshot script gets every key through KEYS, and all keys of a lock
// share its {name} hash tag, so the scripts also run on a Redis Cluster.
//
// Owner tokens never leave this package: owners are shown by their
// fingerprint (core.Fingerprint), as in relock's events and logs. A Lock
// keeps its owners' tokens hidden for ForceUnlock, which deletes it only
// while those owners hold it (force.go).
package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/shard"
)

// Kinds lists the lock types, in the order they are shown.
var Kinds = []string{"mutex", "reentrant", "fair", "rwlock", "semaphore", "latch", "election"}

// Lock is the state of one lock (one kind and name) at one instant.
type Lock struct {
	Kind string // "mutex", "reentrant", "fair", "rwlock", "semaphore", "latch" or "election"
	Name string
	// Held reports whether some owner holds the lock now (an rwlock: a
	// read or write hold whose expiry has not passed).
	Held bool
	// TTL is the lock key's remaining lease: 0 when the key is gone, -1
	// when it has no expiry (which relock never leaves).
	TTL time.Duration
	// Owners are the holders, by fingerprint, in fingerprint order.
	Owners []Owner
	// Mode is an rwlock's "read" or "write" while held, else "".
	Mode string
	// Queue is the waiters of a mutex, reentrant or fair lock, semaphore or
	// election (its candidates), in arrival order (the order in which the
	// lock is handed to them).
	Queue []Waiter
	// WaitingWriters are an rwlock's queued writers (they hold back new
	// readers), in arrival order.
	WaitingWriters []Waiter
	// Permits is a semaphore's capacity (stored while permits are held),
	// Used the permits its live holders hold.
	Permits, Used int
	// Count is a latch's count (Held while it is above 0).
	Count int
	// Fence is the fencing counter (the last token issued), valid when
	// HasFence: the counter exists only for locks used WithFencing. An
	// election's is its leader's term, while it has a leader.
	Fence    int64
	HasFence bool

	// holders has the Owners' tokens, for ForceUnlock. They never leave
	// this package; behind a pointer, fmt's %v shows an address, not
	// them.
	holders *holders
}

// holders are a lock's owner tokens.
type holders struct{ tokens []string }

// setTokens keeps the tokens of l's Owners.
func (l *Lock) setTokens(tokens []string) { l.holders = &holders{tokens: tokens} }

// addToken adds the token of an owner appended to l's Owners.
func (l *Lock) addToken(tok string) {
	if l.holders == nil {
		l.holders = &holders{}
	}
	l.holders.tokens = append(l.holders.tokens, tok)
}

// Owner is one holder of a lock.
type Owner struct {
	Fingerprint string // core.Fingerprint of the owner's token
	// Count is the number of holds: 1 for a mutex, the re-entry count of
	// a reentrant or fair lock, read plus write holds of an rwlock, the
	// permits of a semaphore holder.
	Count int
	// Read and Write are an rwlock owner's read and write hold counts.
	Read, Write int
	// Expires is an rwlock owner's remaining time before its holds
	// expire unless renewed (server time).
	Expires time.Duration
	// Metadata is what the owner gave with relock.WithMetadata, or "";
	// an election leader's value.
	Metadata string
}

// Waiter is one owner waiting for a lock.
type Waiter struct {
	Fingerprint string
	// Alive is how much longer the waiter counts as waiting unless it
	// shows it is alive again (its deadline minus the server's time). At 0
	// it is dead: it is dropped when it reaches the head of the queue.
	Alive time.Duration
	// Count is the permits a semaphore waiter asks for (0 otherwise).
	Count int
	// Metadata is what the waiter gave with relock.WithMetadata, or "";
	// an election candidate's value.
	Metadata string
}

// Ref names one lock.
type Ref struct{ Kind, Name string }

// layout is what a lock type's file tells the rest of the package.
type layout struct {
	kind string
	// waitSuffixes are suffixes of auxiliary keys (after "{name}:")
	// whose presence alone makes a lock worth listing: its waiters, when
	// its main key is gone.
	waitSuffixes []string
	// keys returns the keys that script reads; all share the hash tag.
	keys   func(k core.Keys) []string
	script *redis.Script
	// decode turns script's reply into the lock's state, with ok false
	// when the lock has no data (nobody holds or waits for it).
	decode func(name string, reply any) (l Lock, ok bool, err error)
}

var layouts = []*layout{&mutexLayout, &reentrantLayout, &fairLayout, &rwlockLayout, &semaphoreLayout, &latchLayout, &electionLayout}

func layoutOf(kind string) *layout {
	for _, l := range layouts {
		if l.kind == kind {
			return l
		}
	}
	return nil
}

// ErrNoLock is returned by Inspect when no lock of any type has the name.
var ErrNoLock = errors.New("no lock")

// Inspect returns every lock called name (of any type) in Kinds order. It
// returns an error matching ErrNoLock when there is none.
func Inspect(ctx context.Context, rdb redis.UniversalClient, name string) ([]Lock, error) {
	if err := core.CheckName(name); err != nil {
		return nil, err
	}
	refs := make([]Ref, len(layouts))
	for i, l := range layouts {
		refs[i] = Ref{Kind: l.kind, Name: name}
	}
	locks, err := Read(ctx, rdb, refs)
	if err != nil {
		return nil, err
	}
	if len(locks) == 0 {
		return nil, fmt.Errorf("%w named %q", ErrNoLock, name)
	}
	return locks, nil
}

// batch is how many snapshot scripts Read sends per pipeline.
const batch = 500

// Read returns the state of the locks refs names, in the order given,
// leaving out those that no longer exist. Scripts are sent in pipelines
// (EVALSHA, then EVAL for a script the server does not have).
func Read(ctx context.Context, rdb redis.UniversalClient, refs []Ref) ([]Lock, error) {
	var out []Lock
	for start := 0; start < len(refs); start += batch {
		part := refs[start:min(start+batch, len(refs))]
		cmds := make([]*redis.Cmd, len(part))
		pipe := rdb.Pipeline()
		for i, r := range part {
			l := layoutOf(r.Kind)
			if l == nil {
				return nil, fmt.Errorf("unknown lock type %q", r.Kind)
			}
			cmds[i] = l.script.EvalSha(ctx, pipe, l.keys(core.NewKeys(r.Kind, r.Name)))
		}
		// A Redis error (NOSCRIPT) is per command, looked at below; any
		// other (network) error fails the whole batch.
		var rerr redis.Error
		if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, &rerr) {
			return nil, fmt.Errorf("%s: %w", what(part), err)
		}
		for i, r := range part {
			l := layoutOf(r.Kind)
			reply, err := cmds[i].Result()
			keys := l.keys(core.NewKeys(r.Kind, r.Name))
			if redis.HasErrorPrefix(err, "NOSCRIPT") {
				// Once per script and server: Run loads it (EVAL).
				reply, err = l.script.Run(ctx, rdb, keys).Result()
			}
			// The lock's slot is moving between masters (a Cluster being
			// resharded): ask again once it settled, as the locks do. The
			// scripts only read, so this is safe whatever ran before.
			first := time.Now()
			for tries := 1; shard.Unsettled(rdb, err) && shard.Pause(ctx, tries, first) == nil; tries++ {
				reply, err = l.script.Run(ctx, rdb, keys).Result()
			}
			if err != nil && strings.Contains(err.Error(), "WRONGTYPE") {
				// Keys of another layout: written by another version of
				// relock than this one, or not by relock.
				return nil, fmt.Errorf("inspect %s %q: its keys are not in the layout this relock knows: %w", r.Kind, r.Name, err)
			}
			if err != nil {
				return nil, fmt.Errorf("inspect %s %q: %w", r.Kind, r.Name, err)
			}
			lock, ok, err := l.decode(r.Name, reply)
			if err != nil {
				return nil, fmt.Errorf("inspect %s %q: %w", r.Kind, r.Name, err)
			}
			if ok {
				out = append(out, lock)
			}
		}
	}
	return out, nil
}

// List returns the locks whose name matches pattern (see Scan), sorted by
// name, then kind.
func List(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]Lock, error) {
	refs, err := Scan(ctx, rdb, pattern)
	if err != nil {
		return nil, err
	}
	return Read(ctx, rdb, refs)
}

// what names refs in an error: the name when there is one.
func what(refs []Ref) string {
	for _, r := range refs[1:] {
		if r.Name != refs[0].Name {
			return fmt.Sprintf("inspect %d locks", len(refs))
		}
	}
	return fmt.Sprintf("inspect %q", refs[0].Name)
}

// The helpers below decode script replies: strings, integers, nils (a
// Lua false) and nested arrays.

func replyArray(v any, n int) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) < n {
		return nil, fmt.Errorf("unexpected reply %T of %d elements", v, len(a))
	}
	return a, nil
}

func replyString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

func replyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// replyPairs decodes a flat HGETALL-style array into field/value pairs.
func replyPairs(v any) [][2]string {
	a, _ := v.([]any)
	out := make([][2]string, 0, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		f, _ := replyString(a[i])
		val, _ := replyString(a[i+1])
		out = append(out, [2]string{f, val})
	}
	return out
}

// soloOwner returns owners, an rwlock's or a semaphore's owners with their
// expiries (server ms), or, when there are none and the hash, whose PTTL
// reply is pttl, has the holds of exactly one token (toks, the tokens
// with holds in the hash: a "solo" lock, see rwlock_common.lua), that
// owner with the hash's expiry.
func soloOwner(owners [][2]string, pttl any, now int64, toks []string) [][2]string {
	ms, _ := replyInt(pttl)
	if len(owners) > 0 || ms <= 0 {
		return owners
	}
	seen := map[string]bool{}
	for _, t := range toks {
		seen[t] = true
	}
	if len(seen) != 1 {
		return owners
	}
	return [][2]string{{toks[0], strconv.FormatInt(now+ms, 10)}}
}

// keysOf returns the keys of m.
func keysOf(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// serverMs decodes the seconds and microseconds of TIME into milliseconds.
func serverMs(sec, usec any) (int64, error) {
	s, ok1 := replyInt(sec)
	u, ok2 := replyInt(usec)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("unexpected TIME reply %v %v", sec, usec)
	}
	return s*1000 + u/1000, nil
}

// ttl converts a PTTL reply: -2 (no key) is 0, -1 (no expiry) is -1.
func ttl(v any) time.Duration {
	ms, _ := replyInt(v)
	switch {
	case ms == -1:
		return -1
	case ms < 0:
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// fence sets l's fencing counter from a GET reply (nil when absent).
func (l *Lock) fence(v any) {
	if n, ok := replyInt(v); ok {
		l.Fence, l.HasFence = n, true
	}
}

// countOwners turns a hash of owner token -> hold count into owners, with
// their metadata from meta (by token).
func countOwners(pairs [][2]string, meta map[string]string) []Owner {
	owners := make([]Owner, 0, len(pairs))
	for _, p := range pairs {
		n, _ := strconv.Atoi(p[1])
		owners = append(owners, Owner{Fingerprint: core.Fingerprint(p[0]), Count: n, Metadata: meta[p[0]]})
	}
	sortOwners(owners)
	return owners
}

func sortOwners(o []Owner) {
	sort.Slice(o, func(i, j int) bool { return o[i].Fingerprint < o[j].Fingerprint })
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

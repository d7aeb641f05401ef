package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/relock-go/relock"
)

// Classes of units: the exclusive locks and the semaphore have one, the
// read/write lock two.
const (
	units = 0
	read  = 0
	write = 1
)

// handle is one lock handle, whatever its type, as a sequence drives it.
type handle interface {
	// Acquire takes n units of class: TryLock (block false) or Lock.
	Acquire(ctx context.Context, class, n int, block bool) (bool, error)
	Release(ctx context.Context, class, n int) error
	// Held is the handle's own view of its units of class: a count (the
	// semaphore) or 1 / 0 where the type only says whether.
	Held(class int) int
	// Fence is the fencing token of its current hold, or 0.
	Fence() int64
}

// kind is a lock type as the model knows it.
type kind struct {
	name      string
	classes   int
	reentrant bool // a holder may take its units again (all but the mutex)
	fenced    int  // the class whose holds get fencing tokens, or -1
	semaphore bool
	open      func(c *relock.Client, name string, permits int, opts ...relock.LockOption) handle
	force     func(ctx context.Context, c *relock.Client, name string, permits int) (bool, error)
	key       func(name string) string
	// counts reads Redis's own record of who holds what: owner token ->
	// units per class. It fails on data it cannot explain.
	counts func(m *miniredis.Miniredis, name string) (map[string][2]int, error)
}

// owner is one handle of a sequence and what the model knows of it.
type owner struct {
	i       int
	h       handle
	permits int
	own     [2]int // the handle's counts: its holds, or the unlocks it owes after a loss
	redis   [2]int // what Redis holds for it
	knows   bool   // it knows its holds are lost (and owes unlocks)
	token   string // learned from Redis at its first grant
	fence   int64
}

func (o *owner) holds() bool { return o.own != [2]int{} }

// gone reports whether Redis lost the owner's holds (ForceUnlock) without
// the handle knowing yet.
func (o *owner) gone() bool {
	if o.knows {
		return false
	}
	for c := range o.own {
		if o.own[c] > 0 && o.redis[c] < o.own[c] {
			return true
		}
	}
	return false
}

// sim runs one sequence against the model.
type sim struct {
	t       *testing.T
	e       *env
	k       kind
	name    string
	fencing bool
	owners  []*owner
	op      *relock.Client // the operator's Client (ForceUnlock)
	permits int            // capacity of the semaphore's handles but one
	fence   int64          // highest fencing token seen
	tokens  map[string]*owner
	granted *owner // the owner granted by the step just run
	trace   []string
}

func (s *sim) failf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nsequence (%s):\n  %s", fmt.Sprintf(format, args...), s.k.name, strings.Join(s.trace, "\n  "))
}

// outcome is what the model expects of an acquire.
type outcome struct {
	err      error // the sentinel the call must return
	local    bool  // the handle finds err without asking Redis
	grant    bool
	discover bool // the handle learns that its holds are gone
}

func (s *sim) capacity() int {
	for _, o := range s.owners {
		if o.redis != [2]int{} {
			return o.permits
		}
	}
	return 0
}

func (s *sim) predictAcquire(o *owner, class, n int) outcome {
	if s.k.semaphore && (n < 1 || n > o.permits) {
		return outcome{err: relock.ErrInvalidOption, local: true}
	}
	if o.knows {
		return outcome{err: relock.ErrNotHeld, local: true}
	}
	if !s.k.reentrant && o.own[class] > 0 {
		return outcome{err: relock.ErrAlreadyHeld, local: true}
	}
	if s.k.classes == 2 && class == write && o.own[read] > 0 && o.own[write] == 0 {
		return outcome{err: relock.ErrUpgrade, local: true}
	}
	if s.k.semaphore {
		if c := s.capacity(); c != 0 && c != o.permits {
			return outcome{err: relock.ErrCapacityMismatch}
		}
	}
	if o.gone() {
		return outcome{err: relock.ErrNotHeld, discover: true}
	}
	others := [2]int{}
	for _, p := range s.owners {
		if p != o {
			others[0] += p.redis[0]
			others[1] += p.redis[1]
		}
	}
	switch {
	case s.k.semaphore:
		used := others[0] + o.redis[0]
		return outcome{grant: n <= o.permits-used}
	case s.k.classes == 2 && class == read:
		return outcome{grant: o.own[read] > 0 || o.own[write] > 0 || others[write] == 0}
	case s.k.classes == 2:
		return outcome{grant: o.own[write] > 0 || others == [2]int{}}
	default:
		return outcome{grant: o.own[units] > 0 || others[units] == 0}
	}
}

// acquire runs one acquire call of o; ended makes its ctx one that ended
// before the call (a wait timeout of zero or less).
func (s *sim) acquire(o *owner, class, n int, block, ended bool) {
	s.t.Helper()
	call := "TryLock"
	if block {
		call = "Lock"
	}
	if ended {
		call += "(ended ctx)"
	}
	s.trace = append(s.trace, fmt.Sprintf("h%d %s(class %d, n %d)", o.i, call, class, n))
	want := s.predictAcquire(o, class, n)
	d := 10 * time.Second
	if block && want.err == nil && !want.grant {
		d = 5 * time.Millisecond // it waits: until its ctx ends
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if ended {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer c2()
	}
	before := o.own[class]
	ok, err := o.h.Acquire(ctx, class, n, block)
	s.trace[len(s.trace)-1] += fmt.Sprintf(" = %v, %v", ok, err)
	switch {
	case ended && !want.local:
		// The call checks what it can without Redis (bad counts, a
		// known loss, a mutex held twice, an upgrade), then gives up with
		// its ctx before asking Redis: nothing granted, nothing changed.
		s.wantErr(err, relock.ErrNotObtained)
		s.wantErr(err, context.DeadlineExceeded)
		if ok {
			s.failf("h%d %s: ok with an error", o.i, call)
		}
		want.grant = false
	case want.err != nil:
		s.wantErr(err, want.err)
		if ok {
			s.failf("h%d %s: ok with an error", o.i, call)
		}
		if want.discover {
			o.knows = true
		}
	case want.grant:
		if err != nil || !ok {
			s.failf("h%d %s: got (%v, %v), want the lock", o.i, call, ok, err)
		}
		o.own[class] += n
		o.redis[class] += n
		s.granted = o
	case block:
		s.wantErr(err, relock.ErrNotObtained)
		s.wantErr(err, context.DeadlineExceeded)
	default:
		if err != nil || ok {
			s.failf("h%d %s: got (%v, %v), want (false, nil): the lock is not free", o.i, call, ok, err)
		}
	}
	if want.grant && s.fencing && class == s.k.fenced {
		f := o.h.Fence()
		if before == 0 {
			if f <= s.fence {
				s.failf("h%d: fencing token %d after %d", o.i, f, s.fence)
			}
			s.fence, o.fence = f, f
		} else if f != o.fence {
			s.failf("h%d: re-entry changed the fencing token from %d to %d", o.i, o.fence, f)
		}
	}
}

func (s *sim) release(o *owner, class, n int) {
	s.t.Helper()
	s.trace = append(s.trace, fmt.Sprintf("h%d Unlock(class %d, n %d)", o.i, class, n))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := o.h.Release(ctx, class, n)
	s.trace[len(s.trace)-1] += fmt.Sprintf(" = %v", err)
	switch {
	case s.k.semaphore && n < 1:
		s.wantErr(err, relock.ErrInvalidOption)
	case o.own[class] < n:
		s.wantErr(err, relock.ErrNotHeld)
	case o.knows || o.gone():
		s.wantErr(err, relock.ErrNotHeld)
		if !o.knows {
			s.wantErr(err, relock.ErrLockGone)
			o.knows = true
		}
		o.own[class] -= n
		if !o.holds() {
			o.knows = false
		}
	default:
		if err != nil {
			s.failf("h%d Unlock: %v", o.i, err)
		}
		o.own[class] -= n
		o.redis[class] -= n
	}
}

func (s *sim) forceUnlock() {
	s.t.Helper()
	s.trace = append(s.trace, "ForceUnlock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deleted, err := s.k.force(ctx, s.op, s.name, s.permits)
	s.trace[len(s.trace)-1] += fmt.Sprintf(" = %v, %v", deleted, err)
	if c := s.capacity(); s.k.semaphore && c != 0 && c != s.permits {
		// The operator's handle disagrees on the capacity in use.
		s.wantErr(err, relock.ErrCapacityMismatch)
		return
	}
	if err != nil {
		s.failf("ForceUnlock: %v", err)
	}
	held := false
	for _, o := range s.owners {
		held = held || o.redis != [2]int{}
		o.redis = [2]int{}
	}
	if deleted != held {
		s.failf("ForceUnlock reported %v, want %v", deleted, held)
	}
}

// wantErr fails unless err matches want, which is a documented sentinel
// (or the ctx error that comes with ErrNotObtained).
func (s *sim) wantErr(err, want error) {
	s.t.Helper()
	if !errors.Is(err, want) {
		s.failf("error %v, want one matching %q", err, want)
	}
	documented := false
	for _, e := range sentinels {
		documented = documented || errors.Is(err, e)
	}
	if !documented {
		s.failf("error %v matches no documented sentinel", err)
	}
	noTokens(s.t, err.Error(), s.tokens)
}

// check compares Redis's data and every handle's own view with the model.
func (s *sim) check() {
	s.t.Helper()
	counts, err := s.k.counts(s.e.m, s.name)
	if err != nil {
		s.failf("Redis data: %v", err)
	}
	for tok, c := range counts {
		o := s.tokens[tok]
		if o == nil {
			// A new owner at Redis: the one just granted its first hold.
			if o = s.granted; o == nil || o.token != "" {
				s.failf("Redis holds %v for an owner the model does not know (%v)", c, counts)
			}
			o.token = tok
			s.tokens[tok] = o
		}
		if c != o.redis {
			s.failf("Redis holds %v for h%d, the model %v (all: %v)", c, o.i, o.redis, counts)
		}
	}
	for _, o := range s.owners {
		if _, ok := counts[o.token]; o.redis != [2]int{} && !ok {
			s.failf("h%d's holds %v are not at Redis (%v)", o.i, o.redis, counts)
		}
		for c := 0; c < s.k.classes; c++ {
			want := o.own[c]
			if o.knows {
				want = 0
			}
			if !s.k.semaphore {
				want = min(want, 1)
			}
			if got := o.h.Held(c); got != want {
				s.failf("h%d's Held(class %d) = %d, want %d", o.i, c, got, want)
			}
		}
		if s.k.fenced >= 0 {
			want := int64(0)
			if s.fencing && o.own[s.k.fenced] > 0 && !o.knows {
				want = o.fence
			}
			if got := o.h.Fence(); got != want {
				s.failf("h%d's Fence() = %d, want %d", o.i, got, want)
			}
		}
	}
	// Nobody waits between steps: no queue is left behind, and TryLock
	// never joins one.
	for _, q := range []string{":queue", ":timeouts"} {
		if s.e.m.Exists(s.k.key(s.name) + q) {
			s.failf("a queue is left: %s", s.k.key(s.name)+q)
		}
	}
	s.granted = nil
}

// finish pays every unlock the handles owe, checks that nothing is left
// at Redis but the fencing counter, and that every other key left (request
// records, a reader marker) has a TTL.
func (s *sim) finish() {
	s.t.Helper()
	s.trace = append(s.trace, "-- unlock all")
	for _, o := range s.owners {
		for c := s.k.classes - 1; c >= 0; c-- {
			for o.own[c] > 0 {
				n := 1
				if s.k.semaphore {
					n = o.own[c]
				}
				s.release(o, c, n)
				s.check()
			}
		}
	}
	for _, o := range s.owners {
		if o.holds() || o.redis != [2]int{} || o.knows {
			s.failf("h%d after its unlocks: %+v", o.i, *o)
		}
	}
	for _, k := range s.e.m.Keys() {
		switch {
		case strings.HasSuffix(k, "}:fence"):
		case k == s.k.key(s.name):
			s.failf("the lock is left: %s", k)
		case s.e.m.TTL(k) <= 0 && s.e.m.Exists(k):
			// miniredis's TTL is 0 for a key that is gone too: a request
			// record the owner's sweeper deleted since Keys listed it
			// (as in three CI runs) is no key without a TTL.
			typ := s.e.m.Type(k)
			val := ""
			if typ == "string" {
				val, _ = s.e.m.Get(k)
			}
			s.failf("key %s has no TTL (TTL %v, type %s, value %q)", k, s.e.m.TTL(k), typ, val)
		}
	}
}

// run decodes data into a sequence of calls on 2 to 4 handles of one lock
// (on two Clients) and checks each against the model:
//
//	byte 0: handles (2 + b%3), fencing (b&4), semaphore capacity (1 + b>>3&3)
//	then per step: with b&0x80 an acquire's ctx has ended before the call;
//	of b&0x7f, the operation (% ops) and its handle (/ ops);
//	a semaphore's acquire or release reads n from the next byte.
//
// The operations are TryLock, Lock, Unlock for each class, and ForceUnlock.
func run(t *testing.T, e *env, k kind, data []byte) {
	defer hangGuard(fmt.Sprintf("%s %x", k.name, data))()
	in := &input{b: data}
	cfg := in.byte()
	s := &sim{t: t, e: e, k: k, name: e.reset(), fencing: k.fenced >= 0 && cfg&4 != 0,
		op: e.clients[0], permits: 1 + int(cfg>>3&3), tokens: map[string]*owner{}}
	var opts []relock.LockOption
	opts = append(opts, relock.WithLease(lease))
	if s.fencing {
		opts = append(opts, relock.WithFencing())
	}
	handles := 2 + int(cfg%3)
	for i := 0; i < handles; i++ {
		p := s.permits
		if k.semaphore && i == 3 {
			p++ // one handle disagrees on the capacity
		}
		s.owners = append(s.owners, &owner{i: i, permits: p, h: k.open(e.clients[i%2], s.name, p, opts...)})
	}
	s.trace = append(s.trace, fmt.Sprintf("%d handles, fencing %v, permits %d", handles, s.fencing, s.permits))
	ops := 3*k.classes + 1
	for step := 0; step < 64 && in.more(); step++ {
		b := in.byte()
		ended := b&0x80 != 0
		op, o := int(b&0x7f)%ops, s.owners[int(b&0x7f)/ops%handles]
		if op == ops-1 {
			s.forceUnlock()
			s.check()
			continue
		}
		class, n := op/3, 1
		if k.semaphore {
			n = int(in.byte()) % (o.permits + 2) // 0 and permits+1 are invalid
		}
		switch op % 3 {
		case 0:
			s.acquire(o, class, n, false, ended)
		case 1:
			s.acquire(o, class, n, true, ended)
		case 2:
			s.release(o, class, n)
		}
		s.check()
	}
	s.finish()
}

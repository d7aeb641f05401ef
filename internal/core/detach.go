package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// ReleaseTimeout bounds the work that is done even though the caller's
// ctx may have ended (see Detach): a release, or undoing what an acquire
// that gave up may have taken. go-redis checks a context between the tries
// of a command, and within a try only with Options.ContextTimeoutEnabled:
// a try in flight may run to its ReadTimeout.
const ReleaseTimeout = 5 * time.Second

// detachSlot is how much earlier than ReleaseTimeout after it was made a
// detached context may end: the contexts made while a deadline is still
// that far away share it.
const detachSlot = 100 * time.Millisecond

// releaseBound hands out the deadlines of the detached contexts.
var releaseBound = &deadlines{after: ReleaseTimeout, slot: detachSlot}

// Detach returns a context for work that must be done even though the
// caller's ctx ended (a release; undoing an acquire whose reply was lost;
// leaving a queue): detached from ctx's cancellation, keeping its values
// (tracing), done at least ReleaseTimeout-detachSlot after the call
// began, at most ReleaseTimeout after it returned. Its deadline, a
// context with its timer and channel, is shared with the contexts
// detached while it is still that far away: an Unlock makes no timer of
// its own (context.WithTimeout's timer, channel and contexts were 6 of
// the 39 heap objects of an uncontended mutex cycle), and nothing is to
// be released once the work is done. Inside a testing/synctest bubble
// (time.Now has no monotonic reading there: runtime/time.go strips it,
// which Go does not promise) each call gets a deadline of its own: a
// channel of one bubble must not be used from another
// (TestDetachInBubble checks it on Go 1.25+).
func Detach(ctx context.Context) context.Context {
	return releaseBound.detach(ctx)
}

// deadlines hands out deadlines at most after from now and at least
// after-slot, each a context done then; a deadline is shared until it is
// nearer than after-slot.
type deadlines struct {
	after, slot time.Duration
	cur         atomic.Pointer[deadline]
	mu          sync.Mutex // held while a new shared deadline is made
}

// deadline is a context done at its deadline, with
// context.DeadlineExceeded.
type deadline struct {
	ctx context.Context
	// stop is never called: the deadline ends ctx, and then its timer.
	stop context.CancelFunc
}

func newDeadline(at time.Time) *deadline {
	ctx, stop := context.WithDeadline(context.Background(), at)
	return &deadline{ctx: ctx, stop: stop}
}

// get returns a deadline between now+after-slot and now+after.
func (d *deadlines) get(now time.Time) *deadline {
	if now == now.Round(0) {
		// No monotonic reading: a synctest bubble's fake clock.
		return newDeadline(now.Add(d.after))
	}
	near := now.Add(d.after - d.slot)
	if c := d.cur.Load(); c != nil && !c.at().Before(near) {
		return c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.cur.Load(); c != nil && !c.at().Before(near) {
		return c
	}
	c := newDeadline(now.Add(d.after))
	d.cur.Store(c)
	return c
}

func (c *deadline) at() time.Time {
	at, _ := c.ctx.Deadline()
	return at
}

// detach returns ctx detached from its cancellation, done at a deadline
// of d's.
func (d *deadlines) detach(ctx context.Context) context.Context {
	return detached{Context: context.WithoutCancel(ctx), d: d.get(time.Now())}
}

// detached is a context of Detach: its values are the caller's (the
// embedded context.WithoutCancel, which also keeps context.Cause from
// finding the caller's cancellation); its deadline a shared one.
type detached struct {
	context.Context
	d *deadline
}

func (c detached) Deadline() (time.Time, bool) { return c.d.ctx.Deadline() }

func (c detached) Done() <-chan struct{} { return c.d.ctx.Done() }

func (c detached) Err() error { return c.d.ctx.Err() }

// AfterFunc runs f in a goroutine of its own once c is done, unless stop
// is called first (see context.AfterFunc). The contexts derived from c
// (context.WithCancel, WithTimeout) use it to learn of c's end: without
// it each would start a goroutine that waits for c. (Those still live
// when c ends each run one then, briefly.)
func (c detached) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.d.ctx, f)
}

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

// detachSlot is how much later than ReleaseTimeout a detached context may
// end: the contexts detached within detachSlot of each other share one
// deadline.
const detachSlot = 100 * time.Millisecond

// releaseBound hands out the deadlines of the detached contexts.
var releaseBound = &deadlines{after: ReleaseTimeout, slot: detachSlot}

// Detach returns a context for work that must be done even though the
// caller's ctx ended (a release; undoing an acquire whose reply was lost;
// leaving a queue): detached from ctx's cancellation, keeping its values
// (tracing), done ReleaseTimeout after the call, or up to detachSlot
// later. Its deadline, and the timer and channel behind it, are shared
// with the contexts detached within detachSlot of it: an Unlock costs no
// timer of its own (context.WithTimeout's timer, channel and context were
// 6 of the 39 heap objects of an uncontended mutex cycle). Nothing is to
// be released once the work is done.
func Detach(ctx context.Context) context.Context {
	return releaseBound.detach(ctx)
}

// deadlines hands out deadlines at least after from now, at most
// after+slot, each with a channel closed when it passes; a deadline is
// shared until it is less than after away.
type deadlines struct {
	after, slot time.Duration
	cur         atomic.Pointer[deadline]
	mu          sync.Mutex // held while a new deadline is made
}

// deadline is a point in time, and the channel closed once it passed.
type deadline struct {
	at   time.Time
	done chan struct{}
}

// get returns a deadline between now+after and now+after+slot.
func (d *deadlines) get(now time.Time) *deadline {
	want := now.Add(d.after)
	if c := d.cur.Load(); c != nil && !c.at.Before(want) {
		return c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.cur.Load(); c != nil && !c.at.Before(want) {
		return c
	}
	c := &deadline{at: want.Add(d.slot), done: make(chan struct{})}
	time.AfterFunc(c.at.Sub(now), func() { close(c.done) })
	d.cur.Store(c)
	return c
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

func (c detached) Deadline() (time.Time, bool) { return c.d.at, true }

func (c detached) Done() <-chan struct{} { return c.d.done }

func (c detached) Err() error {
	select {
	case <-c.d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

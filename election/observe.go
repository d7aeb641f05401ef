package election

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/core"
)

// Backlog is how many changes an observer keeps for a receiver that is
// slow to take them (see Observe).
const Backlog = 1024

// Observe reports the election's states on the returned channel: first
// the state when it is called (a Leader, or a vacancy: Term 0), then every
// change, in order: every new leader, every Proclaim that changed the
// value, and every vacancy (which etcd's Observe never reports). The
// channel is closed when ctx ends or the Client is closed; it is closed
// at once if the handle cannot be used (a nil Client, an invalid name or
// option), which Leader reports.
//
// Changes are pushed: the scripts that make them log them at Redis (the
// last 100, for a lease, or a heartbeat if longer, after the last one)
// and publish on the election's channel, through the Client's shared pub/sub connection; the
// observer then reads what was logged since it last looked (one script
// call). A vacancy that no script announces (the leader's process died
// and its lease ran out) is found by a timer set to the leader's
// remaining lease. As with the locks' waits, the observer also reads at
// least once a second (the timer is capped), so that a lost push delays
// a change by that much at most; it never hangs.
//
// No change is skipped, nor reported twice. A slow receiver does not make
// the observer skip: it goes on reading, and keeps up to Backlog changes
// that the receiver has not taken yet, which it hands over in order; only
// past that does it drop the oldest ones. A receiver can see a gap: within
// a term, Rev goes up one at a time, and every new term follows a report
// of the term before it or a vacancy. Gaps happen only when changes are
// lost at Redis or between reads: past Backlog, when a slow observer's
// process fell more than 100 changes behind, or did not run for longer
// than the log's lease, and when Redis lost data.
//
// While Redis is unreachable nothing is reported; the observer tries again
// every second and, once through, reports what it missed. When Redis lost
// the election's data (a restart without persistence, a failover), terms
// start again from what was kept (from 1 when nothing was): Term then
// goes down, or repeats, which the receiver can detect.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if e.h.Check() != nil {
		close(out)
		return out
	}
	o := &observer{e: e, out: out}
	go o.run(ctx)
	return out
}

// observer is the goroutine of one Observe call.
type observer struct {
	e       *Election
	out     chan Leader
	started bool
	after   string // the log's seq up to which changes were read
	cur     Leader // the latest state reported (queued)
	pending []Leader
}

func (o *observer) run(ctx context.Context) {
	defer close(o.out)
	eng := o.e.h.E
	capWait := core.MaxWait
	var wake <-chan struct{}
	if p := eng.Polling(); p > 0 {
		capWait = min(capWait, p)
	} else if sub, err := eng.Hub.Subscribe(ctx, o.e.h.Keys.Channel, ""); err == nil {
		// Without a subscription (Redis refuses it, a Ring shard is down)
		// the observer reads on its timer alone: a nil channel never fires.
		defer sub.Close()
		wake = sub.C
	}
	timer := time.NewTimer(0) // the first read: now
	for {
		var send chan<- Leader
		var next Leader
		if len(o.pending) > 0 {
			send, next = o.out, o.pending[0]
		}
		select {
		case send <- next:
			o.pending[0] = Leader{}
			o.pending = o.pending[1:]
			continue
		case <-wake:
			if !timer.Stop() {
				select { // a value it sent (before Go 1.23's timers)
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		case <-eng.Closed():
			timer.Stop()
			return
		}
		timer.Reset(o.read(ctx, capWait))
	}
}

// read reads what changed since the last read, queues it, and returns
// how long to wait for the next read unless a push comes first: until the
// leader's lease runs out, capped at capWait.
func (o *observer) read(ctx context.Context, capWait time.Duration) time.Duration {
	after := o.after
	if !o.started {
		after = ""
	}
	st, err := o.e.read(ctx, after)
	if err != nil {
		return capWait // Redis unreachable: try again
	}
	if !o.started {
		o.started = true
		o.after = st.last
		if o.after == "" {
			o.after = "0" // every change logged from now on
		}
		o.report(st.leader, true)
		return nextRead(st, capWait)
	}
	for _, en := range st.entries {
		o.report(en.leader, false)
		o.after = en.seq
	}
	if len(st.entries) == 0 && st.last != "" && seqLess(st.last, o.after) {
		// The log began again below what was read (it expired, and the
		// server's clock went back): read it from there.
		o.after = st.last
	}
	// What the log did not say (the leader's lease ran out unannounced,
	// or changes were lost): the state now.
	o.report(st.leader, false)
	return nextRead(st, capWait)
}

// report queues l unless it is the state reported last.
func (o *observer) report(l Leader, first bool) {
	if !first && l.same(o.cur) {
		return
	}
	o.cur = l
	if len(o.pending) == Backlog {
		o.pending[0] = Leader{}
		o.pending = o.pending[1:]
	}
	o.pending = append(o.pending, l)
}

// nextRead is how long to wait for the next read after st: until the
// leader's lease runs out (plus a little jitter, so that observers do not
// read in step), at most capWait.
func nextRead(st state, capWait time.Duration) time.Duration {
	d := st.pttl
	if st.leader.Vacant() || d <= 0 || d > capWait {
		d = capWait
	}
	return d + time.Duration(rand.Int64N(int64(d/10)+1))
}

// seqLess reports whether log seq a is below b.
func seqLess(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

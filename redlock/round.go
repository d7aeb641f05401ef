package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/core"
)

// reply is one master's answer to one request: a script's reply (an
// acquire's array, or one integer as a one-element slice), or why none
// came.
type reply struct {
	i   int
	val []int64
	err error
}

// round is one request sent to several masters at once, each from its own
// goroutine. The caller collects replies until it can decide; replies
// that arrive later are handed to the function given to setLate (or
// dropped if none is given). A goroutine ends when its master answers or
// the request's ctx ends; it never waits for the caller.
type round struct {
	ch chan reply // buffered: one slot per master, so no sender ever blocks
	// backlog says, per master (by index), whether the request was queued
	// behind an earlier one of the handle that was still unanswered.
	backlog []bool

	mu      sync.Mutex
	closed  bool        // decided: later replies are late
	late    func(reply) // for late replies, once set
	lateBuf []reply     // late replies that came before late was set
}

// lane orders the requests of one handle to one master: each runs once
// the one sent before it is done. An acquire must never run after a later
// request of the handle and vice versa: an abort or a release of this
// owner's token that ran after a newer grant would delete it.
type lane struct {
	tail   chan struct{} // closed when the newest request is done; nil when none is pending
	starts []time.Time   // when the requests not yet done were sent, oldest first
}

// send runs f on every master in idx, in parallel, each in its master's
// lane and with ctx bounded by timeout (from when it runs).
func (m *Mutex) send(ctx context.Context, idx []int, timeout time.Duration,
	f func(ctx context.Context, i int, o *core.Owner) ([]int64, error)) *round {
	rd := &round{ch: make(chan reply, len(idx)), backlog: make([]bool, len(m.owners))}
	now := time.Now()
	prev := make([]chan struct{}, len(idx))
	done := make([]chan struct{}, len(idx))
	m.bmu.Lock()
	for k, i := range idx {
		l := &m.lanes[i]
		prev[k], done[k] = l.tail, make(chan struct{})
		rd.backlog[i] = l.tail != nil
		l.tail = done[k]
		l.starts = append(l.starts, now)
	}
	m.bmu.Unlock()
	for k, i := range idx {
		prev, done := prev[k], done[k]
		go func() {
			if prev != nil {
				<-prev
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			v, err := f(cctx, i, &m.owners[i])
			cancel()
			m.bmu.Lock()
			l := &m.lanes[i]
			l.starts = l.starts[1:]
			if l.tail == done {
				l.tail = nil
			}
			m.bmu.Unlock()
			close(done)
			rd.deliver(reply{i: i, val: v, err: err})
		}()
	}
	return rd
}

// unstuck returns the masters of idx whose lane has no request that was
// sent more than m.timeout ago and is still not done, and why the others
// are left out: their master is unreachable or stalled, and an acquire
// queued behind that request would only add to the backlog.
func (m *Mutex) unstuck(idx []int) (out []int, errs []error) {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	for _, i := range idx {
		if st := m.lanes[i].starts; len(st) > 0 && time.Since(st[0]) > m.timeout {
			errs = append(errs, m.masterErr(i, fmt.Errorf("a request sent %v ago is still unanswered",
				time.Since(st[0]).Round(time.Millisecond))))
			continue
		}
		out = append(out, i)
	}
	return out, errs
}

func (rd *round) deliver(r reply) {
	rd.mu.Lock()
	if !rd.closed {
		rd.ch <- r
		rd.mu.Unlock()
		return
	}
	f := rd.late
	if f == nil {
		rd.lateBuf = append(rd.lateBuf, r)
		rd.mu.Unlock()
		return
	}
	rd.mu.Unlock()
	f(r)
}

// collect returns the replies of the n masters asked, once all n
// replied, timeout passed, ctx ended (then gaveUp is true), or decide says
// the replies so far decide the request. When decide also asks for grace,
// collect then waits for the other replies as long again as the decision
// took, at least minGrace (within timeout): a master a little slower than
// the majority is still counted, one that is down or unreachable costs no
// more than that.
// Replies that arrive after collect returned are late (see setLate).
func (rd *round) collect(ctx context.Context, n int, timeout time.Duration,
	decide func([]reply) (decided, grace bool)) (got []reply, gaveUp bool) {
	start := time.Now()
	t := time.NewTimer(timeout)
	defer t.Stop()
	decided := false
wait:
	for len(got) < n {
		if !decided && decide != nil {
			var grace bool
			if decided, grace = decide(got); decided {
				if !grace {
					break
				}
				t.Reset(min(max(time.Since(start), minGrace), timeout-time.Since(start)))
			}
		}
		select {
		case r := <-rd.ch:
			got = append(got, r)
		case <-t.C:
			break wait
		case <-ctx.Done():
			gaveUp = !decided
			break wait
		}
	}
	rd.mu.Lock()
	rd.closed = true
	for {
		select {
		case r := <-rd.ch:
			got = append(got, r) // arrived meanwhile: on time
			continue
		default:
		}
		break
	}
	rd.mu.Unlock()
	return got, gaveUp
}

// minGrace is the least grace collect gives the masters slower than the
// majority: goroutine scheduling on a busy machine.
const minGrace = 2 * time.Millisecond

// setLate hands every late reply, past and future, to f (called from the
// replying goroutine; it must be safe for concurrent use).
func (rd *round) setLate(f func(reply)) {
	rd.mu.Lock()
	rd.late = f
	buf := rd.lateBuf
	rd.lateBuf = nil
	rd.mu.Unlock()
	for _, r := range buf {
		f(r)
	}
}

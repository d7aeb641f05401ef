package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/watchdog"
)

// What a hold knows of one master.
const (
	stNone    = iota // not asked (its Client was closed)
	stUnknown        // asked; no answer yet, or an error: it may hold our key
	stRefused        // refused: another owner's key was there
	stHeld           // granted, and watched by the master's Client watchdog
	stLost           // granted, then lost there (gone, expired or closed)
)

// hold is one hold of a Mutex, from the Lock (or Resume) that took a
// majority to the Unlock (or the loss of the majority).
//
// Each granting master's hold (its part) is watched by that master's
// Client watchdog, as a plain mutex hold is. A watched hold (without
// WithLease or LockFor) is renewed in the watchdog's batches to the
// part's own lease, and declared lost there when a renewal finds the key
// gone, or when no renewal is confirmed before its own local deadline
// (acquire start + the part's lease - drift, moved forward by each
// confirmation). A part with a fixed lease is never renewed: it is lost at
// its local deadline, which only Extend moves. The hold is lost when
// fewer than a majority of the masters' holds are still alive: from then
// on a majority of keys can no longer be counted on.
type hold struct {
	m     *Mutex
	start time.Time // when the granting attempt was sent
	req   string    // its request id (an abort of it refuses a late copy)
	since time.Time // when Lock returned it
	lost  chan struct{}
	scope *core.Scope // the hold's contexts (HoldContext, relock.Do)
	// fixed is the lease every part was taken with (LockFor, WithLease;
	// 0: each master's own, see Mutex.partLease); watched, whether the
	// parts are renewed by their Clients' watchdogs; resumed, whether
	// Resume took it (a late reply then carries the part's remaining
	// lease).
	fixed   time.Duration
	watched bool
	resumed bool

	mu    sync.Mutex
	state []int
	wd    []*watchdog.Hold // per master, while stHeld or stLost
	lease []time.Duration  // per master, once held: the part's lease (as taken, or as Extend set it)
	until []time.Time      // per master, fixed leases only: the part's local deadline
	ext   uint64           // Extends sent: a late reply of an earlier one moves no deadline
	alive int              // masters in stHeld
	ended bool             // Unlock began
	err   error            // why it was lost; nil while not
}

// newHold returns the hold that an attempt (or a Resume) sent at start
// with request id req has taken: the masters that state says are
// stHeld, each part with its lease in leases.
func (m *Mutex) newHold(start time.Time, req string, state []int, fixed time.Duration, watched, resumed bool,
	leases []time.Duration) *hold {
	n := len(state)
	h := &hold{m: m, start: start, req: req, since: time.Now(), lost: make(chan struct{}), scope: core.NewScope(),
		fixed: fixed, watched: watched, resumed: resumed,
		state: state, wd: make([]*watchdog.Hold, n), lease: make([]time.Duration, n), until: make([]time.Time, n)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range state {
		if s == stHeld {
			h.state[i] = stUnknown // watchLocked makes it held
			h.watchLocked(i, leases[i])
		}
	}
	return h
}

// flying returns a part of the handle's last hold whose renewal is in
// flight, with its master's watchdog, or nil.
func (m *Mutex) flying() (*watchdog.Hold, *watchdog.Watchdog) {
	h := m.last.Load()
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, w := range h.wd {
		if w != nil && w.Flying() {
			return w, m.owners[i].E.WD
		}
	}
	return nil, nil
}

// watchLocked makes master i's grant, whose lease there is lease (from
// h.start), part of the hold and has its Client watchdog watch it. The
// caller holds h.mu.
func (h *hold) watchLocked(i int, lease time.Duration) {
	m := h.m
	w := watchdog.NewHold(m.keys.Lock, watchdog.KindString, m.token)
	w.Absent = m.owners[i].Absent() // a master may be a Cluster
	w.OnLost = func(cause error) { h.masterLost(i, cause) }
	h.wd[i] = w
	h.state[i] = stHeld
	h.alive++
	h.lease[i] = lease
	if !h.watched {
		h.until[i] = h.start.Add(lease - watchdog.Drift(lease))
	}
	// A watched part is renewed by its Client's watchdog to its own lease,
	// at a period that fits; a fixed one is only declared lost at its
	// local deadline.
	if m.owners[i].E.WD.Add(w, h.start, lease, h.watched) {
		h.masterLostLocked(i, lockerr.ClosedLoss)
	}
}

// late takes the reply of a master that answered the granting attempt
// (or Resume) after it was decided: a grant joins the hold (if it is
// still on).
func (h *hold) late(r reply) {
	if r.err != nil || len(r.val) < 2 {
		return // unknown: Unlock aborts the request there
	}
	h.mu.Lock()
	var ev *core.Event
	if h.state[r.i] == stUnknown {
		switch {
		case r.val[0] != 1:
			h.state[r.i] = stRefused
		case !h.ended && h.err == nil:
			lease := h.m.partLease(r.i, h.fixed)
			if h.resumed && !h.watched {
				lease = time.Duration(r.val[1]) * time.Millisecond // what is left of it
			}
			h.watchLocked(r.i, lease)
			ev = h.lostEvent()
		}
	}
	h.mu.Unlock()
	h.m.emit(ev)
}

// masterLost is the Client watchdog of master i telling that its hold
// there is lost.
func (h *hold) masterLost(i int, cause error) {
	h.mu.Lock()
	h.masterLostLocked(i, cause)
	ev := h.lostEvent()
	h.mu.Unlock()
	h.m.emit(ev)
}

// masterLostLocked counts the loss of master i; when it leaves fewer than
// a majority alive, the hold is lost, and the other masters' holds are no
// longer renewed (Unlock deletes them; otherwise they expire within a
// lease).
func (h *hold) masterLostLocked(i int, cause error) {
	if h.state[i] != stHeld || h.ended {
		return
	}
	h.state[i] = stLost
	h.alive--
	if h.err != nil || h.alive >= h.m.quorum {
		return
	}
	lostOn := 0
	for j, s := range h.state {
		switch s {
		case stLost:
			lostOn++
		case stHeld:
			h.m.owners[j].E.WD.Remove(h.wd[j])
		}
	}
	detail := fmt.Sprintf("no majority of masters: held on %d of %d, %d needed (lost on %d; last: %s)",
		h.alive, len(h.state), h.m.quorum, lostOn, strings.TrimPrefix(cause.Error(), lockerr.NotHeld.Error()+": "))
	h.loseLocked(reasonOf(cause), detail)
}

// goneLocked reports whether the hold has ended or is lost, first
// counting as lost every part that its Client watchdog has declared lost
// and whose report (masterLost) has not come yet, and declaring lost, as
// its watchdog's timer would, every part past its local deadline whose
// timer has not fired yet (a timer fires late when this process is
// starved of CPU): Held, Extend and HoldContext never count on a part
// that may have expired at its master. The caller holds h.mu.
func (h *hold) goneLocked() bool {
	if h.ended || h.err != nil {
		return true
	}
	for i, s := range h.state {
		if s != stHeld {
			continue
		}
		if _, cause := h.m.owners[i].E.WD.Gone(h.wd[i]); cause != nil {
			h.masterLostLocked(i, cause) // a late masterLost then finds it counted
		}
	}
	return h.err != nil
}

// loseLocked declares the hold lost, and ends its contexts right after
// Lost fires. The caller holds h.mu.
func (h *hold) loseLocked(reason error, detail string) {
	if h.err != nil {
		return
	}
	h.err = lockerr.Loss(reason, detail)
	close(h.lost)
	h.scope.End(h.err)
}

// lostEvent returns the EventLost to emit once h.mu is released, if the
// hold was just lost and somebody observes events; it is returned once.
func (h *hold) lostEvent() *core.Event {
	if h.err == nil || h.since.IsZero() || !h.m.observing() {
		return nil
	}
	ev := h.m.event(core.EventLost, h.err)
	ev.Held = time.Since(h.since)
	h.since = time.Time{} // reported
	return &ev
}

// reasonOf returns the reason sentinel a loss matches.
func reasonOf(cause error) error {
	for _, r := range []error{lockerr.Gone, lockerr.Closed} {
		if errors.Is(cause, r) {
			return r
		}
	}
	return lockerr.Expired
}

// recordTTL is the request-record TTL (ms) of a request about this hold
// to master i: at most the part's lease (see core.MaxRecordTTL).
func (h *hold) recordTTL(i int) int64 {
	h.mu.Lock()
	lease := h.lease[i]
	h.mu.Unlock()
	if lease <= 0 {
		lease = h.m.partLease(i, h.fixed)
	}
	return recordTTL(lease)
}

// end marks the hold as ending (Unlock), ends its contexts and stops its
// renewals. It returns what Unlock needs: the masters' states, when the
// hold began, and the loss (if any).
func (h *hold) end() (state []int, since time.Time, lost error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	h.scope.End(context.Canceled) // whatever the outcome of the release
	for i, s := range h.state {
		if s == stHeld {
			h.m.owners[i].E.WD.Remove(h.wd[i])
		}
	}
	return append([]int(nil), h.state...), h.since, h.err
}

// Err returns why the hold was lost, or nil.
func (h *hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

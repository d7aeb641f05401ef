package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Extend sets the remaining lease of the current hold to d on every
// master whose part is held, at once (in parallel), in one script call
// per master that checks that this handle still holds the key there: it
// never recreates a lost part, nor touches another owner's key.
//
//   - a hold with a fixed lease (relock.WithLease, LockFor) gets d as its
//     lease on each of those masters (sooner or later than before);
//   - a hold the watchdogs renew is renewed now on each of them: each part
//     has at least d left, and its watchdog keeps it at max(d, its lease)
//     from then on, so a pause of this process of up to d cannot lose it.
//
// Extend succeeds when a majority of the masters confirmed; it waits for
// that as Unlock does (up to half the lease, at most 5 s), then for the
// others as long again, and takes the replies that come later as they
// come. After it, the hold's validity is the smallest lease of that
// majority, counted from when Extend was called: with a fixed lease, the
// hold is valid until d (less the drift) after that, and then lost (Lost
// fires), unless extended again. A longer fixed lease is counted on only
// where a master confirmed it (the others keep the lease they had); a
// shorter one on every master it was sent to, from the moment it was
// sent (it may have been set there even if no reply came).
//
// d must lie in [10ms, 7 days] (relock.ErrInvalidOption). When the handle
// does not hold the lock (never locked, unlocked, lost) Extend returns an
// error matching relock.ErrNotHeld (with the loss, for a hold lost and not
// yet unlocked) and sends nothing. A part past its local deadline is lost
// (see Held) and nothing is sent to its master; when that leaves fewer
// than a majority, the hold is lost (Lost fires) and the error matches
// relock.ErrNotHeld and relock.ErrLeaseExpired. A master that replies
// that the key is no longer this handle's has lost its part, as if its
// watchdog had found it; when that leaves fewer than a majority, the hold
// is lost (Lost fires) and the error matches relock.ErrNotHeld and
// relock.ErrLockGone.
// When fewer than a majority confirmed (the others unreachable, slow,
// their Client closed), it returns an error matching ErrNoQuorum, and the
// hold goes on with the parts' leases as above: a hold whose Extend to a
// longer lease did not reach a majority is lost when its old lease runs
// out on the majority. The lease is set absolutely, so a copy that a
// master runs twice (go-redis resends a command whose reply timed out)
// leaves the same lease.
func (m *Mutex) Extend(ctx context.Context, d time.Duration) error {
	if err := m.checkLease(d); err != nil {
		return m.errorf("extend", err)
	}
	ev, err := m.extend(ctx, d)
	m.emit(ev) // with no lock of the handle held: observers may call it
	return err
}

func (m *Mutex) extend(ctx context.Context, d time.Duration) (*core.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.cur
	if h == nil {
		return nil, m.errorf("extend", lockerr.NotHeld)
	}
	if err := ctx.Err(); err != nil {
		return nil, m.errorf("extend", err)
	}
	n := len(m.owners)
	leases := make([]time.Duration, n)
	ws := make([]*watchdog.Hold, n)
	var idx []int
	var errs []error
	h.mu.Lock()
	h.goneLocked() // parts past their local deadline are lost, as Held says (nothing is sent to them)
	if err := h.err; err != nil {
		ev := h.lostEvent()
		h.mu.Unlock()
		return ev, m.errorf("extend", err)
	}
	h.ext++
	gen, exact := h.ext, !h.watched
	for i, s := range h.state {
		if s != stHeld {
			continue
		}
		if err := m.owners[i].Check(); err != nil {
			errs = append(errs, m.masterErr(i, err))
			continue
		}
		idx = append(idx, i)
		ws[i], leases[i] = h.wd[i], d
		if h.watched {
			leases[i] = max(d, h.lease[i])
		}
	}
	h.mu.Unlock()
	idx, berrs := m.unstuck(idx)
	errs = append(errs, berrs...)

	start := time.Now()
	if exact {
		// From now on a master may have the new lease: a shorter one is
		// counted on at once (a longer one once confirmed).
		h.mu.Lock()
		for _, i := range idx {
			h.sentLocked(i, start, leases[i])
		}
		h.mu.Unlock()
	}
	wait := releaseTimeout(m.lease)
	rd := m.send(ctx, idx, wait, func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
		keys, args := watchdog.ExtendCall(ws[i], leases[i], exact, 1)
		res, err := o.Run(ctx, scripts.Renew, keys, args...).Int64Slice()
		if err == nil && len(res) != 1 {
			err = fmt.Errorf("unexpected reply %v", res)
		}
		return res, err
	})
	got, gaveUp := rd.collect(ctx, len(idx), wait, func(got []reply) (bool, bool) {
		ok := 0
		for _, r := range got {
			if r.err == nil && r.val[0] == 1 {
				ok++
			}
		}
		if ok >= m.quorum {
			return true, true // and the others, if they are about as fast
		}
		return ok+len(idx)-len(got) < m.quorum, true
	})

	h.mu.Lock()
	confirmed := 0
	replied := make([]bool, n)
	for _, r := range got {
		replied[r.i] = true
		if r.err != nil {
			errs = append(errs, m.masterErr(r.i, r.err))
		}
		if h.extendedLocked(r, gen, start, leases[r.i]) {
			confirmed++
		}
	}
	for _, i := range idx {
		if !replied[i] {
			errs = append(errs, m.masterErr(i, errNoReply(wait)))
		}
	}
	lost := h.err
	ev := h.lostEvent()
	h.mu.Unlock()
	rd.setLate(func(r reply) {
		h.mu.Lock()
		h.extendedLocked(r, gen, start, leases[r.i])
		ev := h.lostEvent()
		h.mu.Unlock()
		m.emit(ev)
	})

	switch {
	case lost != nil:
		return ev, m.errorf("extend", lost)
	case confirmed >= m.quorum:
		return ev, nil
	case gaveUp:
		return ev, m.errorf("extend", fmt.Errorf("%w (extended on %d of %d masters by then, %d needed)",
			ctx.Err(), confirmed, n, m.quorum))
	}
	return ev, m.errorf("extend", &quorumError{
		detail: fmt.Sprintf("extended on %d of %d masters, %d needed; the others keep the lease they had",
			confirmed, n, m.quorum),
		errs: errs,
	})
}

// extendedLocked takes master i's reply r to the gen-th Extend, sent at
// start, which set its part's lease to lease (exactly, or at least for a
// watched hold), and reports whether it confirmed it: the part's local
// deadline moves with it (unless a later Extend was sent meanwhile, whose
// outcome counts instead). A part that the master no longer has as this
// owner's is lost there. An error changes nothing (see sentLocked). The
// caller holds h.mu.
func (h *hold) extendedLocked(r reply, gen uint64, start time.Time, lease time.Duration) bool {
	i := r.i
	if r.err != nil || h.state[i] != stHeld || h.ended {
		return false
	}
	wd := h.m.owners[i].E.WD
	if err := wd.Err(h.wd[i]); err != nil {
		h.masterLostLocked(i, err) // lost meanwhile: its watchdog's report is on its way
		return false
	}
	if r.val[0] != 1 {
		cause := lockerr.Loss(lockerr.Gone, "lock gone or taken by another owner")
		if !wd.Lose(h.wd[i], cause) { // no longer watched there
			cause = wd.Err(h.wd[i]) // its watchdog declared it first
		}
		h.masterLostLocked(i, cause)
		return false
	}
	if gen != h.ext {
		return false
	}
	if wd.Extend(h.wd[i], start, lease) {
		h.masterLostLocked(i, lockerr.ClosedLoss)
		return false
	}
	if err := wd.Err(h.wd[i]); err != nil {
		h.masterLostLocked(i, err) // lost meanwhile: its watchdog's report is on its way
		return false
	}
	h.lease[i] = lease
	if !h.watched {
		h.until[i] = start.Add(lease - watchdog.Drift(lease))
	}
	return true
}

// sentLocked takes note of an Extend of a fixed lease to master i, sent
// at start: from then on the part there may have lease from start, and if
// that ends before its local deadline, the deadline moves back to it (a
// longer lease is counted on only once confirmed). The caller holds h.mu.
func (h *hold) sentLocked(i int, start time.Time, lease time.Duration) {
	if h.watched || h.state[i] != stHeld || h.ended {
		return
	}
	until := start.Add(lease - watchdog.Drift(lease))
	if !until.Before(h.until[i]) {
		return
	}
	if h.m.owners[i].E.WD.Extend(h.wd[i], start, lease) {
		h.masterLostLocked(i, lockerr.ClosedLoss)
		return
	}
	h.lease[i], h.until[i] = min(h.lease[i], lease), until
}

package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Resume adopts the hold that the handle's owner token has on the
// masters: a handle made with relock.WithToken takes over the hold of
// another handle of that token (in another process, or before a
// restart), on Clients of its own. It asks every master at once (one
// script call each) for the part that the token holds there, and adopts
// them when a majority has one with time left: the validity is the
// smallest remaining lease of the majority with the most left, counted
// from when Resume was called (less the drift), and Resume fails when
// that has run out before the replies came. The handle then holds the
// lock as if it had locked it: Unlock releases it, Lost and HoldContext
// report its loss, Extend extends it. Without a fixed lease, each part is
// renewed at once to its master's watchdog timeout, and by that Client's
// watchdog from then on; with relock.WithLease, each part's lease runs on
// from where it is. A master that answers after the decision joins the
// hold as it would join a Lock's.
//
// It returns an error matching relock.ErrNotHeld, and adopts nothing, when
// the token holds no part on a majority of the masters (never locked,
// released, expired, taken by another owner, or lost on too many), or when
// too little of its lease is left; the parts it did find are left to
// their lease (renewed once, without a fixed lease). It returns
// relock.ErrAlreadyHeld when this handle holds the lock, and an error
// matching ErrNoQuorum when too few masters answered to tell.
func (m *Mutex) Resume(ctx context.Context) error {
	if m.err != nil {
		return m.errorf("resume", m.err)
	}
	begin := time.Now()
	if err := m.resume(ctx); err != nil {
		return err
	}
	m.acquired(ctx, nil, begin)
	return nil
}

func (m *Mutex) resume(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.cur; h != nil {
		if err := h.Err(); err != nil {
			return m.errorf("resume", fmt.Errorf("%w; unlock it before resuming", err))
		}
		return m.errorf("resume", lockerr.AlreadyHeld)
	}
	if err := ctx.Err(); err != nil {
		return m.errorf("resume", err)
	}
	idx, errs := m.usable()
	idx, berrs := m.unstuck(idx)
	errs = append(errs, berrs...)
	n := len(m.owners)
	if len(idx) < m.quorum {
		return m.errorf("resume", &quorumError{errs: errs,
			detail: fmt.Sprintf("%d of %d masters could be asked, %d needed", len(idx), n, m.quorum)})
	}
	watched := m.owners[0].Watched()
	renew := 0
	if watched {
		renew = 1
	}
	id := m.nextID()
	start := time.Now()
	// Replies as an acquire's: {1, ms left} when the token holds a part
	// there, {0, 0} when not.
	rd := m.send(ctx, idx, m.timeout, func(ctx context.Context, _ int, o *core.Owner) ([]int64, error) {
		res, err := o.Run(ctx, scripts.Resume, []string{m.keys.Lock}, watchdog.KindString, m.token,
			o.Lease().Milliseconds(), renew).Int64Slice()
		if err == nil && len(res) != 4 {
			err = fmt.Errorf("unexpected reply %v", res)
		}
		if err != nil {
			return nil, err
		}
		if res[0] == 0 || res[3] <= 0 {
			return []int64{0, 0}, nil
		}
		return []int64{1, res[3]}, nil
	})
	got, gaveUp := rd.collect(ctx, len(idx), m.timeout, func(got []reply) (bool, bool) {
		g := 0
		for _, r := range got {
			if granted(r) {
				g++
			}
		}
		if g >= m.quorum {
			return true, true
		}
		return g+len(idx)-len(got) < m.quorum, false
	})

	state := make([]int, n)
	for _, i := range idx {
		state[i] = stUnknown
	}
	leases := make([]time.Duration, n)
	var left []time.Duration
	for _, r := range got {
		switch {
		case r.err != nil:
			errs = append(errs, m.masterErr(r.i, r.err))
		case granted(r):
			state[r.i] = stHeld
			leases[r.i] = time.Duration(r.val[1]) * time.Millisecond
			if watched {
				leases[r.i] = m.owners[r.i].Lease() // renewed to it
			}
			left = append(left, leases[r.i])
		default:
			state[r.i] = stRefused
		}
	}
	// Valid while a majority of parts is: the quorum-th longest.
	slices.SortFunc(left, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	inTime := false
	var valid time.Duration
	if len(left) >= m.quorum {
		valid = left[m.quorum-1]
		inTime = time.Now().Before(start.Add(valid - watchdog.Drift(valid)))
	}
	if inTime && !gaveUp && ctx.Err() == nil {
		h := m.newHold(start, id, state, 0, watched, true, leases)
		m.cur = h
		m.last.Store(h)
		rd.setLate(h.late)
		return nil
	}
	if gaveUp || ctx.Err() != nil {
		return m.errorf("resume", ctx.Err())
	}
	held, unknown := len(left), len(errs)
	replied := make([]bool, n)
	for _, r := range got {
		replied[r.i] = true
	}
	for _, i := range idx {
		if !replied[i] {
			errs = append(errs, m.masterErr(i, errNoReply(m.timeout)))
			unknown++
		}
	}
	switch {
	case held >= m.quorum:
		return m.errorf("resume", fmt.Errorf("%w: this token holds the lock on %d of %d masters, but with too little of its lease left (%v on a majority)",
			lockerr.NotHeld, held, n, valid))
	case held+unknown >= m.quorum:
		return m.errorf("resume", &quorumError{errs: errs,
			detail: fmt.Sprintf("this token holds the lock on %d of %d masters, %d needed, and %d could not tell",
				held, n, m.quorum, unknown)})
	}
	return m.errorf("resume", fmt.Errorf("%w: this token holds the lock on %d of the %d masters that answered (of %d), %d needed",
		lockerr.NotHeld, held, len(got), n, m.quorum))
}

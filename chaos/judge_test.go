package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// evidence is what the test process knows besides the workers' records:
// when each worker was paused or died, and when Redis lost data.
type evidence struct {
	pauses map[string][]window // per worker: SIGSTOPs sent, and pauses it saw itself
	deaths map[string]int64    // per worker: when it was killed; ends its open holds
	losses []dataLoss          // restarts without persistence, deleted keys
	kept   []window            // restarts with persistence (append-only file, fsync always)
	end    int64               // ends the holds still open whose worker has no death
}

// dataLoss is a span during which Redis lost the data of lock (every lock
// when lock is ""): a restart without persistence, an operator's DEL.
type dataLoss struct {
	lock string
	window
}

// rules are what the judge needs to know of the lock type.
type rules struct {
	capacity int           // permits: most inside at once (semaphore)
	pauseMin time.Duration // a pause this long can outlast a hold's lease
	// late is how much later than when another holder entered a holder
	// may see its own Lost fire and still count as told by then (its
	// process schedules the goroutines that notice it a little late).
	late time.Duration
	// minTTL is how long after an acquire call began its hold's key is
	// sure to live: the lease, or the claim lease of a hand-over (the
	// waiter's last attempt began after the call did, the grant came
	// later still), less the drift margin. 0: not checked.
	minTTL time.Duration
}

// finding is one overlap (or token) the judge reports.
type finding struct {
	lock  string
	holds []*hold
	why   string
}

func (f finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", f.lock, f.why)
	for _, h := range f.holds {
		open := ""
		if h.open {
			open = " (open: its process died inside)"
		}
		lost := "no"
		if h.lost {
			lost = fmt.Sprintf("+%v (%s)", time.Duration(h.lostAt-h.start), h.why)
		}
		unlock := h.unlock
		if h.unlocked > 0 {
			unlock += fmt.Sprintf(" at +%v", time.Duration(h.unlocked-h.start))
		}
		fmt.Fprintf(&b, "\n\t%s %c%d start=%s acq=+%v enter=+%v plan=%v leave=+%v fence=%d lost=%s nested=%s unlock=%s%s",
			h.id, h.mode, h.n, stamp(h.start), time.Duration(h.acq-h.start),
			time.Duration(h.enter-h.start), time.Duration(h.plan), time.Duration(h.leave-h.start), h.fence, lost,
			h.nested, unlock, open)
	}
	return b.String()
}

// verdict is the judge's report on one run.
type verdict struct {
	holds int
	// violations are overlaps that nothing explains: mutual exclusion (or
	// the capacity) broken while Redis kept the data and every holder
	// acted in time.
	violations []finding
	// stale are overlaps in which a holder had been paused long enough to
	// outlive its lease (SIGSTOP, or a pause it saw itself): the
	// documented hazard, which only fencing detects.
	stale []finding
	// overstay are overlaps in which the earlier holder's Lost had fired
	// (at its local deadline, the key about to expire) by the time the
	// other entered, but it was still inside: blocked in a call (a nested
	// acquire through a cut network) that it could not leave at once.
	// Well-written code stops when Lost fires; it was told.
	overstay []finding
	// afterLoss are overlaps after Redis lost the lock's data (a restart
	// without persistence, a deleted key): expected, not hidden.
	afterLoss []finding
	// fenceBack are fencing tokens not above an earlier hold's that
	// nothing explains.
	fenceBack []finding
	// fenceLoss counts tokens that went back after a restart without
	// persistence lost the counter: expected.
	fenceLoss int
	// staleFenced counts the stale (or late) overlaps in which both holds
	// had tokens and the stale one's was lower: a resource checking tokens
	// refuses it; staleFencedOf counts those with both tokens.
	staleFenced, staleFencedOf int
	// staleUntold counts the stale overlaps in which the paused holder's
	// Lost had not fired yet when it left, long after its lease.
	staleUntold int
	// spanned counts the holds inside across a whole restart with
	// persistence.
	spanned int
	// lostEarly are holds that Redis no longer had before the lifetime
	// their acquire gave their key ran out, with no data loss to explain
	// it: a restart with persistence lost them, or another owner took
	// them.
	lostEarly []finding
	// goneAfterRetry counts the unlocks that said "gone" after an earlier
	// Unlock call of the same hold had an unknown outcome (a network
	// error): the earlier call may have released the lock, so they are no
	// evidence of a hold lost early. Unlock resends the release, whose
	// request record answers as the first run did (even after a renewal
	// found the key gone: locktest.FinalReleaseResentAfterRenewal), but
	// the record lives min(lease, 15 s): a retry after a longer cut says
	// "gone" for a release that happened.
	goneAfterRetry int
}

// judge judges the holds of one run: every overlap of two holds that may
// not overlap (or of more permits than the capacity) is explained by the
// evidence or is a violation; fencing tokens must increase.
func judge(all []*hold, ev evidence, r rules) verdict {
	v := verdict{holds: len(all)}
	byLock := map[string][]*hold{}
	for _, h := range all {
		if h.leave == 0 {
			h.open, h.leave = true, ev.end
			if d, ok := ev.deaths[h.worker]; ok && d >= h.enter {
				h.leave = d
			}
		}
		byLock[h.lock] = append(byLock[h.lock], h)
	}
	locks := make([]string, 0, len(byLock))
	for l := range byLock {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	for _, lock := range locks {
		hs := byLock[lock]
		sort.Slice(hs, func(i, j int) bool { return hs[i].enter < hs[j].enter })
		var active []*hold
		for _, b := range hs {
			keep := active[:0]
			for _, a := range active {
				if a.leave > b.enter {
					keep = append(keep, a)
				}
			}
			active = keep
			if b.mode == permits {
				v.judgePermits(lock, active, b, ev, r)
			} else {
				for _, a := range active {
					if a.mode == write || b.mode == write || a.mode == exclusive || b.mode == exclusive {
						v.judgePair(lock, a, b, ev, r)
					}
				}
			}
			active = append(active, b)
		}
		v.judgeFences(lock, hs, ev, r)
		v.judgeKept(lock, hs, ev, r)
	}
	return v
}

// judgeKept counts the holds inside across a whole restart with
// persistence, and checks that no hold was lost before its key's
// guaranteed lifetime (rules.minTTL from its acquire call) ended, unless
// Redis lost the lock's data meanwhile: its Lost fired as "gone", or its
// unlock found the lock gone, that early. Pauses do not matter here: a
// key's lifetime runs on the server's clock, whatever its holder does.
func (v *verdict) judgeKept(lock string, hs []*hold, ev evidence, r rules) {
	for _, w := range ev.kept {
		for _, h := range hs {
			if !h.open && h.enter < w.from && h.leave > w.to {
				v.spanned++
			}
		}
	}
	for _, h := range hs {
		var at int64
		var how string
		switch {
		case h.why == "gone" && h.lostAt > 0:
			at, how = h.lostAt, "its Lost fired (gone)"
		case h.unlock == "notheld-gone" && h.unlocked > 0 && h.tries > 1:
			// An earlier Unlock call's reply was lost: that call may have
			// released the lock itself, and the handle may not know it
			// (see the report of goneAfterRetry). No evidence of a loss.
			v.goneAfterRetry++
			continue
		case h.unlock == "notheld-gone" && h.unlocked > 0:
			at, how = h.unlocked, "its unlock found the lock gone"
		default:
			continue
		}
		if r.minTTL == 0 || at >= h.start+int64(r.minTTL) || ev.lostData(lock, h.start, at) {
			continue
		}
		why := fmt.Sprintf("LOST: %s %v after its acquire call began, before the lease its key is sure to have (%v)",
			how, time.Duration(at-h.start), r.minTTL)
		for _, w := range ev.kept {
			if w.overlaps(h.start, at) {
				why += ", across a restart with persistence"
				break
			}
		}
		v.lostEarly = append(v.lostEarly, finding{lock: lock, holds: []*hold{h}, why: why})
	}
}

// judgePair judges b entering while a, which may not overlap it, is inside.
func (v *verdict) judgePair(lock string, a, b *hold, ev evidence, r rules) {
	f := finding{lock: lock, holds: []*hold{a, b}}
	t := b.enter
	switch {
	case ev.lostHold(lock, a, b.acq) || ev.lostHold(lock, b, a.acq):
		// Either hold may be the one granted first: b's grant can come
		// before a's, its reply late (latency), so that b enters last.
		f.why = "overlap after Redis lost the lock's data"
		v.afterLoss = append(v.afterLoss, f)
	case ev.stale(a, t, r) || ev.stale(b, t, r):
		f.why = "overlap with a holder paused past its lease"
		v.stale = append(v.stale, f)
		stale, other := a, b
		if !ev.stale(a, t, r) {
			stale, other = b, a
		}
		v.countFenced(stale, other)
		if !stale.lost {
			v.staleUntold++
		}
	case a.lost && a.lostAt <= t+int64(r.late):
		f.why = fmt.Sprintf("overlap with a holder told of its loss (%s) %v before the other entered, still inside (nested acquire: %s)",
			a.why, time.Duration(t-a.lostAt), a.nested)
		v.overstay = append(v.overstay, f)
		v.countFenced(a, b)
	case a.lost && ev.paused(a, t, a.lostAt, 0):
		// Its process was starved: its Lost fired late, as after a pause.
		// Only a stall after b entered explains that: had a's process run
		// then, its Lost would have fired by its local deadline, before
		// the key expired and b could take it.
		f.why = "overlap with a holder whose process stalled, so that its Lost fired late"
		v.stale = append(v.stale, f)
		v.countFenced(a, b)
	case a.lost:
		f.why = fmt.Sprintf("VIOLATION: entered %v before the holder inside saw its lease end (%s)", time.Duration(a.lostAt-t), a.why)
		v.violations = append(v.violations, f)
	default:
		f.why = "VIOLATION: two holders inside, both in time and with Redis keeping the data"
		v.violations = append(v.violations, f)
	}
}

func (v *verdict) countFenced(stale, other *hold) {
	if stale.fence > 0 && other.fence > 0 {
		v.staleFencedOf++
		if stale.fence < other.fence {
			v.staleFenced++
		}
	}
}

// judgePermits judges b entering a semaphore with the active holds inside.
func (v *verdict) judgePermits(lock string, active []*hold, b *hold, ev evidence, r rules) {
	in := append(append([]*hold(nil), active...), b)
	sum, unexplained := 0, 0
	var loss, pause, told bool
	for _, h := range in {
		sum += h.n
		switch {
		case ev.lostHold(lock, h, b.acq):
			loss = true
		case ev.stale(h, b.enter, r):
			pause = true
		case h != b && h.lost && h.lostAt <= b.enter+int64(r.late):
			told = true
		case h != b && h.lost && ev.paused(h, b.enter, h.lostAt, 0):
			pause = true
		default:
			unexplained += h.n
		}
	}
	if sum <= r.capacity {
		return
	}
	f := finding{lock: lock, holds: in}
	switch {
	case unexplained > r.capacity:
		f.why = fmt.Sprintf("VIOLATION: %d permits inside, capacity %d", unexplained, r.capacity)
		v.violations = append(v.violations, f)
	case loss:
		f.why = fmt.Sprintf("%d permits inside after Redis lost the data", sum)
		v.afterLoss = append(v.afterLoss, f)
	case pause:
		f.why = fmt.Sprintf("%d permits inside, counting holders paused past their lease", sum)
		v.stale = append(v.stale, f)
	case told:
		f.why = fmt.Sprintf("%d permits inside, counting holders told of their loss before", sum)
		v.overstay = append(v.overstay, f)
	}
}

// judgeFences checks that the fencing tokens of a lock's holds increase
// in the order the holds were acquired.
func (v *verdict) judgeFences(lock string, hs []*hold, ev evidence, r rules) {
	var fenced []*hold
	for _, h := range hs {
		if h.fence > 0 {
			fenced = append(fenced, h)
		}
	}
	sort.Slice(fenced, func(i, j int) bool { return fenced[i].acq < fenced[j].acq })
	var top *hold
	for _, h := range fenced {
		switch {
		case top == nil || h.fence > top.fence:
			top = h
		case ev.lostCounter(top.start, h.acq):
			// The counter was lost with everything else: it starts over.
			v.fenceLoss++
			top = h
		case ev.stale(h, h.enter, r):
			// Granted before top, back from a pause after it: the stale
			// holder's lower token is what fencing refuses.
		default:
			v.fenceBack = append(v.fenceBack, finding{lock: lock, holds: []*hold{top, h},
				why: fmt.Sprintf("VIOLATION: fencing token %d after %d", h.fence, top.fence)})
		}
	}
}

// lostData reports whether Redis lost the data of lock after a hold
// acquired from start on and before another was acquired at acq.
func (ev evidence) lostData(lock string, start, acq int64) bool {
	for _, l := range ev.losses {
		if (l.lock == "" || l.lock == lock) && start <= l.to && l.from <= acq {
			return true
		}
	}
	return false
}

// lostHold reports whether Redis may have lost h's hold of lock before
// another hold was acquired at acq: it lost the lock's data after h's
// acquire call began and before acq, and h's hold did not survive it. A
// hold whose Lost never fired and whose unlock succeeded was still in
// Redis at its end: it was granted after the loss (a waiter's call that
// began before it, or a call resent to the restarted server), and the
// loss explains none of its overlaps.
func (ev evidence) lostHold(lock string, h *hold, acq int64) bool {
	return ev.lostData(lock, h.start, acq) && (h.lost || h.unlock != "ok")
}

// lostCounter reports whether Redis lost every key (fencing counters too)
// between from and to.
func (ev evidence) lostCounter(from, to int64) bool {
	for _, l := range ev.losses {
		if l.lock == "" && from <= l.to && l.from <= to {
			return true
		}
	}
	return false
}

// stale reports whether h may have been past its lease at t: its worker
// was paused, for long enough, after h's acquire was granted (the pause
// ended at most r.late before the acquire call returned: the grant's reply
// waited in the socket) and before t. A pause while the acquire was still
// waiting explains nothing.
func (ev evidence) stale(h *hold, t int64, r rules) bool {
	return ev.paused(h, h.acq-int64(r.late), t, r.pauseMin)
}

// paused reports whether h's worker was paused for at least min (SIGSTOP,
// or a stall it saw itself) at some time between from and to.
func (ev evidence) paused(h *hold, from, to int64, min time.Duration) bool {
	for _, w := range ev.pauses[h.worker] {
		if time.Duration(w.to-w.from) >= min && w.overlaps(from, to) {
			return true
		}
	}
	return false
}

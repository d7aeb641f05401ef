package bench

import (
	"fmt"
	"time"
)

// The targets.
const (
	// TargetCycleCmds is the exact number of commands of an uncontended
	// mutex Lock+Unlock.
	TargetCycleCmds = 2
	// TargetFloorRatio bounds the uncontended mutex cycle time (median)
	// over the raw SET NX PX + DEL floor.
	TargetFloorRatio = 1.15
	// TargetHandoffRTTs is "at most a few round trips": the hand-off
	// median over the median PING sent after the same idle holds, in the
	// same measurement (see HandoffStats.IdleRTT).
	TargetHandoffRTTs = 4
	// TargetFairContenders, TargetFairHold, TargetJain and
	// TargetFairWait define the fair-lock target: at 16 contenders with
	// a 1ms hold, Jain's index >= 0.99 and the worst wait within 2x
	// contenders x hold.
	TargetFairContenders = 16
	TargetFairHold       = time.Millisecond
	TargetJain           = 0.99
	TargetFairWait       = 2
	// TargetWatchdogLocks and TargetWatchdogTrips: 10,000 held locks
	// renewed in at most 100 round trips per renewal period.
	TargetWatchdogLocks = 10000
	TargetWatchdogTrips = 100
	// TargetGoroutineSlack is how many more goroutines holding all the
	// locks may add than holding a tenth of them ("constant").
	TargetGoroutineSlack = 2
)

// Evaluate sets the Targets of every result: those of the issue for
// relock's kinds, and mutual exclusion (no violation) for every kind.
// The hand-off target "no worse than the best peer" is evaluated when the
// results include peers.
func Evaluate(results []Result) {
	var best *Result
	for i := range results {
		r := &results[i]
		if r.Peer && r.Scenario == ScenarioHandoff && usable(r) && r.Latency.N > 0 {
			if best == nil || r.Latency.P50 < best.Latency.P50 {
				best = r
			}
		}
	}
	for i := range results {
		r := &results[i]
		r.Targets = nil
		if r.Skipped != "" {
			continue
		}
		if !r.Peer && r.Err != "" {
			r.check("runs without error", false, r.Err)
			continue
		}
		switch r.Scenario {
		case ScenarioUncontended:
			if r.Kind != KindMutex || r.Uncontended == nil {
				break
			}
			r.check(fmt.Sprintf("exactly %d commands per cycle", TargetCycleCmds),
				r.CmdsPerOp == TargetCycleCmds,
				fmt.Sprintf("%.3f commands, %.3f round trips per cycle", r.CmdsPerOp, r.TripsPerOp))
			u := r.Uncontended
			r.check(fmt.Sprintf("cycle within %.2fx of SET NX+DEL", TargetFloorRatio),
				u.RatioP50 <= TargetFloorRatio,
				fmt.Sprintf("p50 %s vs floor %s = %s (mean %s); the script floor SET NX + compare-and-delete script alone is %s of the floor, and relock %s of it",
					fmtDur(r.Latency.P50), fmtDur(u.Floor.P50), ratio(u.RatioP50), ratio(u.RatioMean),
					ratio(float64(u.ScriptFloor.P50)/float64(u.Floor.P50)), ratio(u.ScriptRatioP50)))
		case ScenarioHandoff:
			if r.Peer || r.Handoff == nil {
				break
			}
			if h := r.Handoff; h.IdleRTT > 0 {
				r.check(fmt.Sprintf("p50 within %d round trips", TargetHandoffRTTs),
					r.Latency.N > 0 && h.P50IdleRTTs <= TargetHandoffRTTs,
					fmt.Sprintf("p50 %s = %.1f x PING after the same idle hold (%s), %.1f x hot-loop PING (%s); pushed floor %s (%s)",
						fmtDur(r.Latency.P50), h.P50IdleRTTs, fmtDur(h.IdleRTT), h.P50RTTs, fmtDur(h.RTT), fmtDur(h.Floor.P50), ratio(h.RatioP50)))
			}
			if best != nil {
				r.check("p50 no worse than the best peer",
					r.Latency.N > 0 && r.Latency.P50 <= best.Latency.P50,
					fmt.Sprintf("%s vs %s %s", fmtDur(r.Latency.P50), best.Kind, fmtDur(best.Latency.P50)))
			}
			if r.Handoff.Timeouts > 0 {
				r.check("every waiter woken", false, fmt.Sprintf("%d timeouts", r.Handoff.Timeouts))
			}
		case ScenarioContention:
			r.check("no mutual-exclusion violation", r.Violations == 0, fmt.Sprintf("%d violations", r.Violations))
			c := r.Contention
			if r.Kind != KindFair || c == nil || r.Contenders != TargetFairContenders || c.Hold != TargetFairHold {
				break
			}
			r.check(fmt.Sprintf("Jain index >= %.2f", TargetJain), c.Jain >= TargetJain, fmt.Sprintf("Jain %.4f", c.Jain))
			bound := TargetFairWait * time.Duration(r.Contenders) * c.Hold
			r.check(fmt.Sprintf("worst wait within %dx contenders x hold", TargetFairWait), c.MaxWait <= bound,
				fmt.Sprintf("max wait %s vs %s (%d x %s; actually held %s on average; p50 wait %s)",
					fmtDur(c.MaxWait), fmtDur(bound), r.Contenders, fmtDur(c.Hold), fmtDur(c.MeanHold), fmtDur(r.Latency.P50)))
		case ScenarioReadHeavy:
			r.check("no mutual-exclusion violation", r.Violations == 0, fmt.Sprintf("%d violations", r.Violations))
		case ScenarioWatchdog:
			w := r.Watchdog
			if r.Peer || w == nil {
				break
			}
			scale := ""
			if w.Locks != TargetWatchdogLocks {
				scale = fmt.Sprintf(" (%s locks, not %s)", group(int64(w.Locks)), group(TargetWatchdogLocks))
			}
			trips, per := w.TripsPerPeriod, fmtDur(w.Period)+" period (time-averaged)"
			if w.Rounds > 0 {
				trips, per = w.TripsPerRound, fmt.Sprintf("renewal round (%d rounds, every %s)", w.Rounds, fmtDur(w.RoundInterval))
			}
			r.check(fmt.Sprintf("at most %d round trips per renewal period", TargetWatchdogTrips),
				trips <= TargetWatchdogTrips,
				fmt.Sprintf("%s round trip(s) per %s; %s cmds/s%s", fmtNum(trips), per, fmtNum(w.CmdsPerSec), scale))
			r.check("constant number of goroutines",
				w.GoroutinesAll <= w.GoroutinesTenth+TargetGoroutineSlack,
				fmt.Sprintf("%+d goroutines holding %s, %+d holding %s", w.GoroutinesTenth, group(int64(max(1, w.Locks/10))), w.GoroutinesAll, group(int64(w.Locks))))
			if w.Lost > 0 {
				r.check("no hold lost", false, fmt.Sprintf("%d lost", w.Lost))
			}
		}
		if !r.Peer && r.Stalled {
			r.check("no stall", false, stallDetail(r))
		}
	}
}

func (r *Result) check(target string, met bool, detail string) {
	r.Targets = append(r.Targets, Check{Target: target, Met: met, Detail: detail})
}

// usable reports whether r has figures (no error, no stall).
func usable(r *Result) bool { return r.Err == "" && !r.Stalled && r.Skipped == "" }

func stallDetail(r *Result) string {
	if r.Err != "" {
		return r.Err
	}
	if len(r.Notes) > 0 {
		return r.Notes[0]
	}
	return "stalled"
}

// Verdict summarizes r's targets: "met", "MISSED", or "" when none apply.
func (r *Result) Verdict() string {
	if len(r.Targets) == 0 {
		return ""
	}
	for _, c := range r.Targets {
		if !c.Met {
			return "MISSED"
		}
	}
	return "met"
}

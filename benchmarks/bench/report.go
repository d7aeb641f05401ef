package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Meta describes a run.
type Meta struct {
	Command         string        `json:"command"`
	Server          string        `json:"server"`
	RealRedis       bool          `json:"real_redis"`
	RTT             time.Duration `json:"rtt_ns"`
	Go              string        `json:"go"`
	CPUs            int           `json:"cpus"`
	Start           time.Time     `json:"start"`
	Duration        time.Duration `json:"duration_ns"`
	Hold            time.Duration `json:"hold_ns"`
	HandoffHold     time.Duration `json:"handoff_hold_ns"`
	WatchdogLocks   int           `json:"watchdog_locks"`
	WatchdogTimeout time.Duration `json:"watchdog_timeout_ns"`
	Kinds           []KindInfo    `json:"kinds"`
}

// KindInfo describes a kind in a report.
type KindInfo struct {
	Name string `json:"name"`
	Peer bool   `json:"peer"`
	Note string `json:"note,omitempty"`
}

// Report is a run's figures.
type Report struct {
	Meta    Meta     `json:"meta"`
	Results []Result `json:"results"`
	// Base is the relock kind that peers are compared with.
	Base string `json:"base,omitempty"`
}

// MiniredisWarning is printed with every run on miniredis.
const MiniredisWarning = "NOTE: embedded miniredis: these are NOT Redis figures. miniredis runs in this process, " +
	"shares its CPUs and is several times slower per lock cycle than redis-server; " +
	"use -redis redis://host:port for real figures."

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: a header, one row per kind and
// scenario, the targets, and the ratios of relock to each peer.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Meta
	var b strings.Builder
	fmt.Fprintf(&b, "relockbench: %s, PING p50 %s; %s, %d CPUs; %v per measurement, critical section %v\n",
		m.Server, fmtDur(m.RTT), m.Go, m.CPUs, m.Duration, m.Hold)
	if !m.RealRedis {
		b.WriteString(MiniredisWarning + "\n")
	}
	b.WriteString("P50/P99/MAX: uncontended = one Lock+Unlock cycle; handoff = holder's Unlock call to the waiter's Lock return;\n" +
		"contention and read-heavy = wait for the lock (read-heavy: readers). CMDS/OP = commands through the client hook per op\n" +
		"(handoff: per hand-off, both owners). Floors are plain go-redis clients measured interleaved in the same run.\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tKIND\tOPS/S\tP50\tP99\tMAX\tCMDS/OP\tDETAILS\tTARGETS")
	prev := ""
	for i := range r.Results {
		res := &r.Results[i]
		label := res.Label()
		if label != prev && prev != "" {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
		}
		prev = label
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, res.Kind, strings.Join(row(res), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var checks []string
	for _, res := range r.Results {
		for _, c := range res.Targets {
			v := "met   "
			if !c.Met {
				v = "MISSED"
			}
			checks = append(checks, fmt.Sprintf("  %s  %s  %s: %s: %s", v, res.Kind, res.Label(), c.Target, c.Detail))
		}
	}
	if len(checks) > 0 {
		b.WriteString("\nTargets:\n" + strings.Join(checks, "\n") + "\n")
	}
	b.WriteString("\nKinds:\n")
	for _, k := range m.Kinds {
		fmt.Fprintf(&b, "  %s: %s\n", k.Name, k.Note)
	}
	if err := r.writeRatios(&b); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// row returns the cells after SCENARIO and KIND.
func row(r *Result) []string {
	blank := []string{"", "", "", "", ""}
	switch {
	case r.Skipped != "":
		return append(blank, "n/a: "+r.Skipped, "")
	case r.Err != "" && r.Stalled:
		return append(blank, strings.Join(append([]string{"STALLED: " + r.Err}, r.Notes...), "; "), r.Verdict())
	case r.Err != "":
		return append(blank, "ERROR: "+r.Err, r.Verdict())
	}
	cells := []string{fmtNum(r.OpsPerSec), fmtDur(r.Latency.P50), fmtDur(r.Latency.P99), fmtDur(r.Latency.Max), fmtNum(r.CmdsPerOp)}
	switch r.Scenario {
	case ScenarioWatchdog:
		cells = blank
	case ScenarioHandoff:
		cells[0] = "" // the floor's samples share the time
	}
	d := details(r)
	if r.Stalled {
		d = "STALLED; " + d
	}
	return append(cells, d, r.Verdict())
}

// details is the scenario-specific summary of r.
func details(r *Result) string {
	var parts []string
	switch {
	case r.Uncontended != nil:
		u := r.Uncontended
		parts = append(parts, fmt.Sprintf("floor SET NX+DEL p50 %s (%s cmds): %s p50, %s mean",
			fmtDur(u.Floor.P50), fmtNum(u.FloorCmdsPerOp), ratio(u.RatioP50), ratio(u.RatioMean)))
		if u.ScriptFloor.N > 0 {
			parts = append(parts, fmt.Sprintf("SET NX+CAD script p50 %s (%s of the floor): %s",
				fmtDur(u.ScriptFloor.P50), ratio(float64(u.ScriptFloor.P50)/float64(u.Floor.P50)), ratio(u.ScriptRatioP50)))
		}
	case r.Handoff != nil:
		h := r.Handoff
		parts = append(parts, fmt.Sprintf("n=%d", r.Latency.N),
			fmt.Sprintf("pushed floor p50 %s: %s", fmtDur(h.Floor.P50), ratio(h.RatioP50)),
			fmt.Sprintf("p50 = %.1f idle RTT (%s) = %.1f hot RTT", h.P50IdleRTTs, fmtDur(h.IdleRTT), h.P50RTTs),
			"release p50 "+fmtDur(h.Release.P50))
		if h.Timeouts > 0 {
			parts = append(parts, fmt.Sprintf("%d waiters not woken", h.Timeouts))
		}
	case r.Contention != nil:
		c := r.Contention
		parts = append(parts, fmt.Sprintf("Jain %.3f", c.Jain), "max wait "+fmtDur(c.MaxWait), "held "+fmtDur(c.MeanHold),
			fmt.Sprintf("violations %d", r.Violations), "longest gap "+fmtDur(c.LongestGap))
		if r.Errors > 0 {
			parts = append(parts, fmt.Sprintf("lock errors %d", r.Errors))
		}
	case r.ReadHeavy != nil:
		h := r.ReadHeavy
		mode := "shared reads"
		if !h.Shared {
			mode = "exclusive baseline"
		}
		parts = append(parts, mode, fmt.Sprintf("reads %s/s writes %s/s", fmtNum(h.ReadsPerSec), fmtNum(h.WritesPerSec)),
			fmt.Sprintf("readers together max %d mean %.1f", h.MaxReaders, h.MeanReaders),
			"write wait p99 "+fmtDur(h.WriteWait.P99)+" max "+fmtDur(h.WriteWait.Max),
			fmt.Sprintf("violations %d", r.Violations))
	case r.Watchdog != nil:
		w := r.Watchdog
		renew := fmt.Sprintf("no renewal rounds: %s cmds in %s round trips per %s period (time-averaged)",
			fmtNum(w.CmdsPerPeriod), fmtNum(w.TripsPerPeriod), fmtDur(w.Period))
		if w.Rounds > 0 {
			renew = fmt.Sprintf("a renewal round every %s (period %s): %s cmds in %s round trip(s)",
				fmtDur(w.RoundInterval), fmtDur(w.Period), fmtNum(w.CmdsPerRound), fmtNum(w.TripsPerRound))
		}
		parts = append(parts, fmt.Sprintf("%s held; %s; %s cmds/s", group(int64(w.Locks)), renew, fmtNum(w.CmdsPerSec)),
			fmt.Sprintf("goroutines %+d (%+d at a tenth)", w.GoroutinesAll, w.GoroutinesTenth),
			fmt.Sprintf("%s B/lock", fmtNum(w.BytesPerLock)))
		if w.Lost > 0 {
			parts = append(parts, fmt.Sprintf("lost %d", w.Lost))
		}
	}
	if r.SubsPerOp != nil {
		parts = append(parts, fmt.Sprintf("+%.2f SUBSCRIBE/UNSUBSCRIBE per op", *r.SubsPerOp))
	}
	parts = append(parts, r.Notes...)
	return strings.Join(parts, "; ")
}

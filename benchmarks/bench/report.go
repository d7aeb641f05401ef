package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Meta describes a run.
type Meta struct {
	Command           string        `json:"command"`
	Server            string        `json:"server"`
	RealRedis         bool          `json:"real_redis"`
	RTT               time.Duration `json:"rtt_ns"`
	Go                string        `json:"go"`
	CPUs              int           `json:"cpus"`
	Start             time.Time     `json:"start"`
	Duration          time.Duration `json:"duration_ns"`
	Hold              time.Duration `json:"hold_ns"`
	HandoffHold       time.Duration `json:"handoff_hold_ns"`
	WatchdogLocks     int           `json:"watchdog_locks"`
	PeerWatchdogLocks int           `json:"peer_watchdog_locks,omitempty"`
	WatchdogTimeout   time.Duration `json:"watchdog_timeout_ns"`
	Contenders        []int         `json:"contenders,omitempty"`
	ContendedOwners   int           `json:"contended_owners,omitempty"`
	ContendedHold     time.Duration `json:"contended_hold_ns,omitempty"`
	Readers           []int         `json:"many_readers,omitempty"`
	Waiters           []int         `json:"many_waiters,omitempty"`
	LockNames         int           `json:"lock_names,omitempty"`
	LockWorkers       int           `json:"lock_workers,omitempty"`
	MemoryLocks       int           `json:"memory_locks,omitempty"`
	MemoryWaiters     int           `json:"memory_waiters,omitempty"`
	RecordRate        float64       `json:"record_rate,omitempty"`
	// Elapsed is how long the whole run took.
	Elapsed time.Duration `json:"elapsed_ns"`
	Kinds   []KindInfo    `json:"kinds"`
	// RedlockMasters are the addresses of the independent masters of the
	// multi-master kinds (-redlock), if any.
	RedlockMasters string `json:"redlock_masters,omitempty"`
	// Cluster describes the Redis Cluster of the cluster kinds
	// (-cluster), if any.
	Cluster string `json:"cluster,omitempty"`
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

// TextOptions choose what WriteText writes after the summary.
type TextOptions struct {
	// Full adds every measurement: a table of every scenario and kind
	// with its details, the kinds' notes, and the ratios of relock to
	// each peer (and of the multi-master and cluster kinds).
	Full bool
	// Targets adds the project's performance targets, each met or
	// MISSED with its figure (and a TARGETS column to the full table).
	Targets bool
}

// WriteText writes the report for people: the summary (relock's lock
// types and the peers side by side, as ratios over plain Redis commands,
// within 80 columns), then what o asks for.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	var b strings.Builder
	r.writeSummary(&b)
	if o.Full {
		b.WriteString("\n")
		r.writeFull(&b, o.Targets)
	}
	if o.Targets {
		r.writeTargets(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFull writes every measurement: one row per kind and scenario with
// its details wrapped on the lines below it, then the kinds' notes and
// the ratios of relock to each peer.
func (r *Report) writeFull(b *strings.Builder, targets bool) {
	m := r.Meta
	b.WriteString(wrap(fmt.Sprintf("Every measurement (server PING p50 %s, critical section %v):", fmtDur(m.RTT), m.Hold), 0, reportWidth))
	if m.Command != "" {
		b.WriteString(wrapHang("command: "+m.Command, 0, 2, reportWidth))
	}
	if m.RedlockMasters != "" {
		b.WriteString(wrapHang("multi-master kinds (relock/redlock-N, redsync/redlock-N) on the first N of: "+m.RedlockMasters+
			"; their floors are those of the single server above", 0, 2, reportWidth))
	}
	if m.Cluster != "" {
		b.WriteString(wrapHang("cluster kinds (relock/...@cluster, on a go-redis ClusterClient): "+m.Cluster+
			"; their floors are measured on the cluster (SPUBLISH/SSUBSCRIBE for the pushed hand-off, PING to the key's master)",
			0, 2, reportWidth))
	}
	b.WriteString(wrap(tableLegend, 0, reportWidth) + "\n")

	right := []bool{false, false, true, true, true, true, true, false}
	t := &table{right: right}
	head := []string{"SCENARIO", "KIND", "OPS/S", "P50", "P99", "MAX", "CMDS/OP"}
	if targets {
		head = append(head, "TARGETS")
	}
	t.add(head...)
	prev := ""
	// Measurements that do not apply are listed after the table, by
	// scenario and reason.
	type na struct{ scenario, why string }
	var naOrder []na
	naKinds := map[na][]string{}
	for i := range r.Results {
		res := &r.Results[i]
		if res.Skipped != "" {
			k := na{res.Scenario, res.Skipped}
			if _, ok := naKinds[k]; !ok {
				naOrder = append(naOrder, k)
			}
			if kinds := naKinds[k]; len(kinds) == 0 || kinds[len(kinds)-1] != res.Kind {
				naKinds[k] = append(kinds, res.Kind)
			}
			continue
		}
		label := res.Label()
		if label != prev && prev != "" {
			t.gap()
		}
		prev = label
		cells, detail := row(res)
		if !targets {
			cells = cells[:len(cells)-1]
		}
		t.add(append([]string{label, res.Kind}, cells...)...).detail = detail
	}
	t.write(b, 4)
	for _, k := range naOrder {
		b.WriteString(wrapHang(fmt.Sprintf("n/a: %s for %s: %s", k.scenario, strings.Join(naKinds[k], ", "), k.why), 0, 4, reportWidth))
	}
	b.WriteString("\nKinds:\n")
	for _, k := range m.Kinds {
		b.WriteString(wrapHang(k.Name+": "+k.Note, 2, 4, reportWidth))
	}
	r.writeRatios(b)
	r.writeMultiRatios(b)
	r.writeClusterRatios(b)
}

// writeTargets writes every target met or MISSED with its figure.
func (r *Report) writeTargets(b *strings.Builder) {
	// Mutual exclusion is checked in every measurement with owners
	// contending: one line for all of them when it held everywhere.
	var checks strings.Builder
	exclusive, exclusiveOK := 0, true
	for _, res := range r.Results {
		for _, c := range res.Targets {
			if c.Target == targetExclusion {
				exclusive++
				exclusiveOK = exclusiveOK && c.Met
			}
		}
	}
	met, missed := 0, 0
	if exclusive > 0 && exclusiveOK {
		met++
		checks.WriteString(wrapPrefix("  met     ", fmt.Sprintf("every kind: %s", targetExclusion), 10, reportWidth))
		checks.WriteString(wrap(fmt.Sprintf("0 violations in all %d measurements with contending owners", exclusive), 10, reportWidth))
	}
	for _, res := range r.Results {
		for _, c := range res.Targets {
			if c.Target == targetExclusion && exclusiveOK {
				continue
			}
			v := "met   "
			if !c.Met {
				v = "MISSED"
				missed++
			} else {
				met++
			}
			checks.WriteString(wrapPrefix("  "+v+"  ", fmt.Sprintf("%s  %s: %s", res.Kind, res.Label(), c.Target), 10, reportWidth))
			checks.WriteString(wrap(c.Detail, 10, reportWidth))
		}
	}
	if checks.Len() == 0 {
		b.WriteString("\nTargets: none applies to what was measured.\n")
		return
	}
	b.WriteString(fmt.Sprintf("\nTargets (%d met, %d MISSED):\n", met, missed) + checks.String())
}

// tableLegend says what the table's columns mean in each scenario.
const tableLegend = "P50/P99/MAX: uncontended, many-locks, server-cost = one Lock+Unlock cycle; handoff, handoff-contended, " +
	"many-waiters = the holder's Unlock call to the next holder's Lock return (handoff-contended, " +
	"many-waiters: each release call to the next Lock return of another owner than the releaser); " +
	"contention, read-heavy = " +
	"wait for the lock (read-heavy: readers); many-readers = a probe's RLock+RUnlock while the readers hold. " +
	"CMDS/OP = commands through the client hook per op (handoff: per hand-off, both owners). Floors are plain " +
	"go-redis clients measured interleaved in the same run: SET NX PX + DEL, and SET NX PX + a compare-and-delete " +
	"script (CAD). Server µs = time inside scripts and functions (EVALSHA, FCALL) from INFO commandstats, and " +
	"Redis CPU from INFO cpu, real server only."

// row returns the cells after SCENARIO and KIND, and the details.
func row(r *Result) ([]string, string) {
	blank := []string{"", "", "", "", ""}
	switch {
	case r.Skipped != "":
		return append(blank, ""), "n/a: " + r.Skipped
	case r.Err != "" && r.Stalled:
		return append(blank, r.Verdict()), strings.Join(append([]string{"STALLED: " + r.Err}, r.Notes...), "; ")
	case r.Err != "":
		return append(blank, r.Verdict()), "ERROR: " + r.Err
	}
	cells := []string{fmtNum(r.OpsPerSec), fmtDur(r.Latency.P50), fmtDur(r.Latency.P99), fmtDur(r.Latency.Max), fmtNum(r.CmdsPerOp)}
	switch r.Scenario {
	case ScenarioWatchdog, ScenarioMemory:
		cells = blank
	case ScenarioHandoff:
		cells[0] = "" // the floor's samples share the time
	}
	d := details(r)
	if r.Stalled {
		d = "STALLED; " + d
	}
	return append(cells, r.Verdict()), d
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
		if u.SweepsPerOp > 0 {
			parts = append(parts, fmt.Sprintf("+%s background DELs of request records per cycle", fmtNum(u.SweepsPerOp)))
		}
	case r.Handoff != nil:
		h := r.Handoff
		parts = append(parts, fmt.Sprintf("n=%d", r.Latency.N),
			fmt.Sprintf("pushed floor p50 %s: %s", fmtDur(h.Floor.P50), ratio(h.RatioP50)))
		if h.ScriptFloor.N > 0 {
			parts = append(parts, fmt.Sprintf("with an owner-checked release %s: %s", fmtDur(h.ScriptFloor.P50), ratio(h.ScriptRatioP50)))
		}
		parts = append(parts, fmt.Sprintf("p50 = %.1f idle RTT (%s) = %.1f hot RTT", h.P50IdleRTTs, fmtDur(h.IdleRTT), h.P50RTTs),
			"release p50 "+fmtDur(h.Release.P50))
		if h.Timeouts > 0 {
			parts = append(parts, fmt.Sprintf("%d waiters not woken", h.Timeouts))
		}
	case r.ManyWaiters != nil:
		w := r.ManyWaiters
		q := "queue length unknown"
		if w.QueueLen >= 0 {
			q = fmt.Sprintf("%s queued mid-window", group(w.QueueLen))
		}
		parts = append(parts, fmt.Sprintf("%s, %s", count(w.Waiters, "waiter"), q))
		if c := r.Contention; c != nil {
			if s := c.Server; s != nil {
				parts = append(parts, fmt.Sprintf("server %.1f µs/call, %.2f calls = %.1f µs per acquisition", s.UsPerCall, s.CallsPerOp, s.UsPerOp))
			}
			parts = append(parts, fmt.Sprintf("n=%d hand-offs", r.Latency.N), "wait p50 "+fmtDur(c.Wait.P50)+" max "+fmtDur(c.MaxWait),
				fmt.Sprintf("Jain %.3f", c.Jain), fmt.Sprintf("violations %d", r.Violations))
		}
	case r.Contention != nil:
		c := r.Contention
		if r.Scenario == ScenarioHandoffContended {
			parts = append(parts, fmt.Sprintf("%d owners, hold %s (held %s)", r.Contenders, fmtDur(c.Hold), fmtDur(c.MeanHold)),
				fmt.Sprintf("n=%d releases handed to another owner; next holder p50 %s, the releaser itself %.0f%% of the time",
					c.Handoff.N, fmtDur(c.NextHolder.P50), 100*c.SelfHandoffs),
				"release call p50 "+fmtDur(c.Release.P50),
				"wait p50 "+fmtDur(c.Wait.P50)+" max "+fmtDur(c.MaxWait))
			if s := c.Server; s != nil {
				parts = append(parts, fmt.Sprintf("server %.1f µs/call, %.2f calls = %.1f µs per acquisition", s.UsPerCall, s.CallsPerOp, s.UsPerOp))
			}
			parts = append(parts, fmt.Sprintf("Jain %.3f", c.Jain), fmt.Sprintf("violations %d", r.Violations))
		} else {
			parts = append(parts, fmt.Sprintf("Jain %.3f", c.Jain), "max wait "+fmtDur(c.MaxWait), "held "+fmtDur(c.MeanHold),
				fmt.Sprintf("violations %d", r.Violations), "longest gap "+fmtDur(c.LongestGap))
		}
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
	case r.ManyReaders != nil:
		m := r.ManyReaders
		s := fmt.Sprintf("%s holding (taken in %.1fs)", count(m.Readers, "reader"), m.SetupSecs)
		if m.BytesPerReader > 0 {
			s += fmt.Sprintf(", %s B of Redis memory per reader", fmtNum(m.BytesPerReader))
		}
		parts = append(parts, s)
		if m.Read != nil && m.Write != nil {
			parts = append(parts, fmt.Sprintf("server %.1f µs per RLock/RUnlock call, %.1f µs per refused write attempt", m.Read.UsPerCall, m.Write.UsPerCall))
		}
		parts = append(parts, "write attempt p50 "+fmtDur(m.WriteAttempt.P50))
	case r.ManyLocks != nil:
		m := r.ManyLocks
		parts = append(parts, fmt.Sprintf("%d goroutines, %s names, a handle per cycle", m.Workers, group(int64(m.Names))),
			fmt.Sprintf("floor SET NX PX+DEL %s/s (p50 %s): %s", fmtNum(m.FloorPerSec), fmtDur(m.Floor.P50), ratio(m.Ratio)))
		if m.ClientCPU > 0 {
			parts = append(parts, fmt.Sprintf("CPU per cycle: client %s, server %s (floor: %s, %s)",
				fmtDur(m.ClientCPU), fmtDur(m.ServerCPU), fmtDur(m.FloorClientCPU), fmtDur(m.FloorServerCPU)))
		}
		if m.Collisions > 0 {
			parts = append(parts, fmt.Sprintf("%d floor collisions", m.Collisions))
		}
	case r.Watchdog != nil:
		w := r.Watchdog
		renew := fmt.Sprintf("no renewal rounds: %s cmds in %s round trips per %s period (time-averaged)",
			fmtNum(w.CmdsPerPeriod), fmtNum(w.TripsPerPeriod), fmtDur(w.Period))
		if w.Rounds > 0 {
			renew = fmt.Sprintf("a renewal round every %s (period %s): %s cmds in %s round trip(s)",
				fmtDur(w.RoundInterval), fmtDur(w.Period), fmtNum(w.CmdsPerRound), fmtNum(w.TripsPerRound))
		}
		parts = append(parts, fmt.Sprintf("%s held (taken in %.1fs); %s; %s cmds/s", group(int64(w.Locks)), w.AcquireSecs, renew, fmtNum(w.CmdsPerSec)),
			fmt.Sprintf("goroutines %+d (%+d at a tenth)", w.GoroutinesAll, w.GoroutinesTenth),
			fmt.Sprintf("client %s B per held lock", fmtNum(w.BytesPerLock)))
		if s := w.Server; s != nil {
			parts = append(parts, fmt.Sprintf("server script time %s µs per held lock and period (%s µs per call)", fmtNum(s.UsPerOp), fmtNum(s.UsPerCall)))
		}
		if w.Lost > 0 {
			parts = append(parts, fmt.Sprintf("lost %d", w.Lost))
		}
	case r.Memory != nil:
		parts = append(parts, memoryDetails(r.Memory)...)
	case r.ServerCost != nil:
		parts = append(parts, costDetails(r.ServerCost)...)
	}
	if r.SubsPerOp != nil {
		parts = append(parts, fmt.Sprintf("+%.2f SUBSCRIBE/UNSUBSCRIBE per op", *r.SubsPerOp))
	}
	parts = append(parts, r.Notes...)
	return strings.Join(parts, "; ")
}

// memoryDetails summarizes a redis-memory measurement.
func memoryDetails(m *MemoryStats) []string {
	var by []string
	for _, c := range classes(m.ByClass) {
		by = append(by, fmt.Sprintf("%s %s", c, fmtNum(m.ByClass[c])))
	}
	parts := []string{fmt.Sprintf("held lock: %s B in %s key(s) (%s), alloc +%s B",
		fmtNum(m.BytesPerLock), fmtNum(m.KeysPerLock), strings.Join(by, ", "), fmtNum(m.AllocPerLock))}
	if m.Waiters > 0 {
		parts = append(parts, fmt.Sprintf("queued waiter: %s B in keys, alloc +%s B (%s queued)",
			fmtNum(m.BytesPerWaiter), fmtNum(m.AllocPerWaiter), group(m.Queued)))
	}
	if m.LeftPerCycle > 0 {
		parts = append(parts, fmt.Sprintf("a cycle leaves %s key(s) of %s B (alloc %s B) for %s: %s at %s cycles/s of new owners (bytes x rate x TTL)",
			fmtNum(m.LeftPerCycle), fmtNum(m.BytesPerLeft), fmtNum(m.AllocPerLeft), fmtDur(m.LeftTTL),
			fmtBytes(m.SteadyRecords), group(int64(m.RecordRate))))
	} else {
		parts = append(parts, "a cycle leaves no key")
	}
	if rec := m.Records; rec != nil {
		parts = append(parts, recordDetails(rec))
	}
	return parts
}

// recordDetails summarizes the measured request records.
func recordDetails(rec *RecordStats) string {
	s := fmt.Sprintf("%s cycles of new handles left %s key(s) right after, %s %s later, %s once their client was closed",
		group(int64(rec.Cycles)), group(rec.LeftAfter), group(rec.LeftAfterWait), fmtDur(rec.Wait), group(rec.LeftAfterClose))
	if rec.LeftAfter > 0 {
		s += fmt.Sprintf(" (%s B each, TTL %s)", fmtNum(rec.BytesPerKey), fmtDur(rec.TTL))
	}
	if rec.Rate > 0 {
		s += fmt.Sprintf("; cycling %s at %s cycles/s: %s keys of %s (alloc %s) = %s at %s cycles/s",
			fmtDur(rec.Window), fmtNum(rec.Rate), group(rec.Keys), fmtBytes(float64(rec.Bytes)), signedBytes(rec.Alloc),
			fmtBytes(rec.AtRate), group(int64(rec.TargetRate)))
	}
	if rec.LeftAfter > 0 || rec.LeftAfterWait > 0 {
		how := "measured"
		if !rec.SteadyMeasured {
			how = "computed (the keys outlive the window: keys per cycle x bytes x rate x TTL)"
		}
		s += fmt.Sprintf("; steady state at %s cycles/s: %s, %s", group(int64(rec.TargetRate)), fmtBytes(rec.Steady), how)
	}
	return s
}

// costDetails summarizes a server-cost measurement.
func costDetails(s *ServerCostStats) []string {
	l, f, sf := s.Lock, s.Floor, s.ScriptFloor
	parts := []string{
		fmt.Sprintf("per cycle: Redis CPU %s = %s SET NX+CAD's %s (%s SET NX+DEL's %s)",
			fmtDur(l.ServerCPU), ratioOf(l.ServerCPU, sf.ServerCPU), fmtDur(sf.ServerCPU), ratioOf(l.ServerCPU, f.ServerCPU), fmtDur(f.ServerCPU)),
		fmt.Sprintf("in scripts %s = %s the CAD script's %s", fmtDur(l.ScriptTime), ratioOf(l.ScriptTime, sf.ScriptTime), fmtDur(sf.ScriptTime)),
		fmt.Sprintf("client CPU %s = %s SET NX+CAD's %s (SET NX+DEL %s)%s",
			fmtDur(l.ClientCPU), ratioOf(l.ClientCPU, sf.ClientCPU), fmtDur(sf.ClientCPU), fmtDur(f.ClientCPU), clientNote(l, sf)),
		fmt.Sprintf("commands: %s sent, %s run by Redis (%s inside %s script calls; SET NX+CAD: %s, %s)",
			fmtNum(l.Commands), fmtNum(l.ServerCalls), fmtNum(l.Inner()), fmtNum(l.ScriptCalls), fmtNum(sf.Commands), fmtNum(sf.ServerCalls)),
		fmt.Sprintf("medians of %d blocks of %d cycles", s.Blocks, s.CyclesPerBlock),
	}
	if len(l.ByCommand) > 0 {
		parts = append(parts, fmt.Sprintf("Redis's time per cycle in each command (inside scripts or not): %s; SET NX+CAD's: %s",
			fmtByCommand(l.ByCommand), fmtByCommand(sf.ByCommand)))
	}
	if l.Background > 0 {
		parts = append(parts, fmt.Sprintf("%s commands per cycle sent in the background within %s", fmtNum(l.Background), fmtDur(s.Settle)))
	}
	if c := s.Contended; c != nil {
		parts = append(parts, fmt.Sprintf("contended (%d owners, hold %s, %s acquisitions): per acquisition %s commands sent "+
			"(%s round trips), %s run by Redis, Redis CPU %s, in scripts %s, client CPU %s",
			c.Owners, fmtDur(c.Hold), group(c.Acquisitions), fmtNum(c.Cost.Commands), fmtNum(c.TripsPerAcq),
			fmtNum(c.Cost.ServerCalls), fmtDur(c.Cost.ServerCPU), fmtDur(c.Cost.ScriptTime), fmtDur(c.Cost.ClientCPU)))
	}
	return parts
}

// clientNote is where a cycle's client CPU goes beside the CAD floor's:
// the heap objects allocated and the context switches, per cycle; empty
// when not measured (results saved before they were).
func clientNote(l, sf Cost) string {
	if l.Allocs == 0 && l.Switches == 0 {
		return ""
	}
	return fmt.Sprintf(", %s heap objects allocated (SET NX+CAD %s) and %s context switches (%s)",
		fmtNum(l.Allocs), fmtNum(sf.Allocs), fmtNum(l.Switches), fmtNum(sf.Switches))
}

// fmtByCommand lists the commands of a Cost.ByCommand by time, most first:
// "RENAME 1 x 3.91µs, GET 1 x 812ns"; a command that ran in fewer than
// one operation in twenty is left out.
func fmtByCommand(m map[string]CommandCost) string {
	names := make([]string, 0, len(m))
	for name, c := range m {
		if c.Calls >= 0.05 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(m[b].Time, m[a].Time); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %s x %s", strings.ToUpper(name), fmtNum(m[name].Calls), fmtDur(m[name].Time))
	}
	return strings.Join(parts, ", ")
}

// signedBytes formats a growth of n bytes with its sign: +5.63 MB, -812 B.
func signedBytes(n int64) string {
	if n < 0 {
		return "-" + fmtBytes(float64(-n))
	}
	return "+" + fmtBytes(float64(n))
}

// ratioOf formats a/b as a ratio, or "-" when b is 0.
func ratioOf(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return ratio(float64(a) / float64(b))
}

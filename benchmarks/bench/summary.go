package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// summaryWidth is the width of the summary, in columns.
const summaryWidth = 80

// summaryRow is one lock type's results in the summary.
type summaryRow struct {
	kind string
	peer bool
	// The results the columns come from; nil when not measured.
	cycle, many, handoff, busy, cost, costRead *Result
}

// summaryColumn is a column of the summary: its name, the result of a row
// it shows, the figure it shows of it, and the line that explains it.
type summaryColumn struct {
	name    string
	of      func(*summaryRow) *Result
	cell    func(*Result) (string, bool)
	explain string
}

// busyContenders is the contention measurement the summary's BUSY LOCK
// column shows: that many owners, or else the most measured.
const busyContenders = 16

// summaryRows gathers r's results by kind, in the order of the kinds.
func (r *Report) summaryRows() []*summaryRow {
	var rows []*summaryRow
	byKind := map[string]*summaryRow{}
	for i := range r.Results {
		res := &r.Results[i]
		row := byKind[res.Kind]
		if row == nil {
			row = &summaryRow{kind: res.Kind, peer: res.Peer}
			byKind[res.Kind] = row
			rows = append(rows, row)
		}
		switch res.Scenario {
		case ScenarioUncontended:
			row.cycle = res
		case ScenarioManyLocks:
			row.many = res
		case ScenarioHandoff:
			row.handoff = res
		case ScenarioContention:
			if res.Contenders < 2 {
				break
			}
			if row.busy == nil || res.Contenders == busyContenders ||
				(row.busy.Contenders != busyContenders && res.Contenders > row.busy.Contenders) {
				row.busy = res
			}
		case ScenarioServerCost:
			if res.Read {
				row.costRead = res
			} else {
				row.cost = res
			}
		}
	}
	rows = slices.DeleteFunc(rows, func(row *summaryRow) bool {
		return row.cycle == nil && row.many == nil && row.handoff == nil && row.busy == nil && row.cost == nil
	})
	// In the order of the run's kinds (relock's, then the peers).
	order := map[string]int{}
	for i, k := range r.Meta.Kinds {
		order[k.Name] = i + 1
	}
	slices.SortStableFunc(rows, func(a, b *summaryRow) int { return cmp.Compare(order[a.kind], order[b.kind]) })
	return rows
}

// cell is the figure of res that get returns, or why there is none.
func cell(res *Result, get func(*Result) (string, bool)) string {
	switch {
	case res == nil:
		return "-"
	case res.Skipped != "":
		return "n/a"
	case res.Err != "" && res.Stalled:
		return "stalled"
	case res.Err != "":
		return "error"
	}
	s, ok := get(res)
	if !ok {
		return "-"
	}
	if res.Stalled {
		s += "!"
	}
	return s
}

func cycleRatio(res *Result) (string, bool) {
	if u := res.Uncontended; u != nil && u.RatioP50 > 0 {
		return ratio(u.RatioP50), true
	}
	return "", false
}

func manyRatio(res *Result) (string, bool) {
	if m := res.ManyLocks; m != nil && m.Ratio > 0 {
		return ratio(1 / m.Ratio), true
	}
	return "", false
}

func handoffRatio(res *Result) (string, bool) {
	if h := res.Handoff; h != nil && h.RatioP50 > 0 && res.Latency.N > 0 {
		return ratio(h.RatioP50), true
	}
	return "", false
}

// busyShare is the share of the time the lock was held while owners
// contended: acquisitions per second x the time each hold lasted.
func busyShare(res *Result) (float64, bool) {
	c := res.Contention
	if c == nil || res.Ops == 0 {
		return 0, false
	}
	return min(1, res.OpsPerSec*c.MeanHold.Seconds()), true
}

func busyCell(res *Result) (string, bool) {
	v, ok := busyShare(res)
	return fmt.Sprintf("%.0f%%", 100*v), ok
}

func costRatio(res *Result) (string, bool) {
	if s := res.ServerCost; s != nil && s.Floor.ServerCPU > 0 {
		return ratio(float64(s.Lock.ServerCPU) / float64(s.Floor.ServerCPU)), true
	}
	return "", false
}

// measured reports whether res has figures: no error (a stalled
// measurement's figures are shown, marked).
func measured(res *Result) bool { return res.Err == "" && res.Skipped == "" }

// busyOwners says how many owners the BUSY LOCK column's figures are of.
func busyOwners(rows []*summaryRow) string {
	n := 0
	for _, row := range rows {
		if row.busy == nil {
			continue
		}
		if n != 0 && row.busy.Contenders != n {
			return "several owners (see below)"
		}
		n = row.busy.Contenders
	}
	return count(n, "owner")
}

// details is the figures behind a row's ratios, in words.
func (row *summaryRow) details() string {
	var parts []string
	if res := row.cycle; res != nil && measured(res) && res.Uncontended != nil {
		parts = append(parts, fmt.Sprintf("cycle %s (plain %s), %s round trips",
			fmtDur(res.Latency.P50), fmtDur(res.Uncontended.Floor.P50), fmtNum(res.TripsPerOp)))
	}
	if res := row.many; res != nil && measured(res) && res.ManyLocks != nil {
		parts = append(parts, fmt.Sprintf("many locks %s cycles/s (plain %s/s)",
			fmtNum(res.OpsPerSec), fmtNum(res.ManyLocks.FloorPerSec)))
	}
	if res := row.handoff; res != nil && measured(res) && res.Handoff != nil && res.Latency.N > 0 {
		parts = append(parts, fmt.Sprintf("hand-off %s (plain %s)", fmtDur(res.Latency.P50), fmtDur(res.Handoff.Floor.P50)))
	}
	if res := row.busy; res != nil && measured(res) && res.Contention != nil {
		c := res.Contention
		parts = append(parts, fmt.Sprintf("busy lock: %d owners, %s turns/s, wait p50 %s, worst %s",
			res.Contenders, fmtNum(res.OpsPerSec), fmtDur(c.Wait.P50), fmtDur(c.MaxWait)))
	}
	for _, res := range []*Result{row.cost, row.costRead} {
		if res == nil || !measured(res) || res.ServerCost == nil {
			continue
		}
		s := res.ServerCost
		side := "Redis CPU"
		if res.Read {
			side = "read side: Redis CPU"
		}
		parts = append(parts, fmt.Sprintf("%s %s per cycle (plain %s, %s), %s commands run (plain %s)",
			side, fmtDur(s.Lock.ServerCPU), fmtDur(s.Floor.ServerCPU),
			ratio(float64(s.Lock.ServerCPU)/float64(s.Floor.ServerCPU)), fmtNum(s.Lock.ServerCalls), fmtNum(s.Floor.ServerCalls)))
	}
	return strings.Join(parts, "; ")
}

// writeSummary writes the report for a user: one row per lock type with
// its figures as ratios over plain Redis commands doing the same job,
// the figures behind them on the lines below, and what each column means.
func (r *Report) writeSummary(b *strings.Builder) {
	m := r.Meta
	name, _, _ := strings.Cut(m.Command, " ")
	if name == "" {
		name = "relockbench"
	}
	head := fmt.Sprintf("%s: %s; %s, %d CPUs; %v per measurement", name, m.Server, m.Go, m.CPUs, m.Duration)
	if m.Elapsed > 0 {
		head += "; the run took " + m.Elapsed.Round(time.Second).String()
	}
	b.WriteString(wrapHang(head+".", 0, 2, summaryWidth))
	if !m.RealRedis {
		b.WriteString("\n" + wrap(MiniredisWarning, 0, summaryWidth))
	}
	rows := r.summaryRows()
	if len(rows) == 0 {
		b.WriteString("\nNothing was measured that the summary shows: see -full.\n")
		return
	}
	// The columns of what was measured, each with the line that explains it.
	columns := []summaryColumn{
		{"CYCLE", func(row *summaryRow) *Result { return row.cycle }, cycleRatio,
			"one owner locks and unlocks a free lock: its time (median) over SET NX PX + DEL's."},
		{"MANY LOCKS", func(row *summaryRow) *Result { return row.many }, manyRatio,
			fmt.Sprintf("%d goroutines lock and unlock names drawn at random from %s, a new handle each time: "+
				"the time per cycle over the same goroutines doing SET NX PX + DEL.", m.LockWorkers, group(int64(m.LockNames)))},
		{"HAND-OFF", func(row *summaryRow) *Result { return row.handoff }, handoffRatio,
			"the holder unlocks while another process waits for the lock: the time until the waiter holds it " +
				"(median), over a hand-off done with plain commands (PUBLISH to wake the waiter, then its SET NX PX)."},
		{"BUSY LOCK", func(row *summaryRow) *Result { return row.busy }, busyCell,
			fmt.Sprintf("%s take turns holding one lock for %v each: the share of the time it was held "+
				"(100%%: no time lost between one holder and the next).", busyOwners(rows), m.Hold)},
		{"REDIS CPU", func(row *summaryRow) *Result { return row.cost }, costRatio,
			"the CPU time the Redis server spends on one uncontended cycle (median), over its CPU time for SET NX PX + DEL."},
	}
	columns = slices.DeleteFunc(columns, func(c summaryColumn) bool {
		return !slices.ContainsFunc(rows, func(row *summaryRow) bool { return c.of(row) != nil })
	})
	hasCost := slices.ContainsFunc(rows, func(row *summaryRow) bool { return row.cost != nil && row.cost.Skipped == "" })
	higher := ""
	if slices.ContainsFunc(rows, func(row *summaryRow) bool { return row.busy != nil }) {
		higher = " (BUSY LOCK: higher is better)"
	}
	b.WriteString("\n" + wrap("Each figure compares a lock with plain Redis commands doing the same job, "+
		"measured in the same run: 1.00x is as fast as plain Redis, lower is better"+higher+".", 0, summaryWidth) + "\n")

	t := &table{right: []bool{false, true, true, true, true, true}}
	headers := []string{"LOCK"}
	for _, c := range columns {
		headers = append(headers, c.name)
	}
	t.add(headers...)
	for _, row := range rows {
		cells := []string{row.kind}
		for _, c := range columns {
			cells = append(cells, cell(c.of(row), c.cell))
		}
		t.add(cells...).detail = row.details()
	}
	t.writeWidth(b, 4, summaryWidth)

	b.WriteString("\n")
	for _, c := range columns {
		b.WriteString(wrapPrefix(fmt.Sprintf("%-12s", c.name), c.explain, 12, summaryWidth))
	}
	if slices.ContainsFunc(rows, func(row *summaryRow) bool {
		return slices.ContainsFunc([]*Result{row.cycle, row.many, row.handoff, row.busy, row.cost}, func(res *Result) bool {
			return res != nil && res.Stalled && res.Err == ""
		})
	}) {
		b.WriteString(wrapPrefix(fmt.Sprintf("%-12s", "!"), "the measurement stalled at some point (see below).", 12, summaryWidth))
	}

	b.WriteString("\n")
	r.writeChecks(b)
	if !hasCost && !m.RealRedis {
		b.WriteString(wrap("What a lock costs the Redis server itself (its CPU, the commands it runs) is measured "+
			"against a real server only (-redis).", 0, summaryWidth))
	}
	var kinds []string
	for _, k := range m.Kinds {
		if k.Peer {
			kinds = append(kinds, k.Name+": "+k.Note)
		}
	}
	b.WriteString("\n")
	if len(kinds) > 0 {
		b.WriteString("The other libraries, as measured:\n")
		for _, k := range kinds {
			b.WriteString(wrapHang(k, 2, 4, summaryWidth))
		}
	} else {
		b.WriteString(wrap("redsync, bsm/redislock and rueidislock side by side with relock, in the same run "+
			"(a module of its own; from the repository root): go -C benchmarks/peers run . [-redis URL]", 0, summaryWidth))
	}
	b.WriteString("\n" + wrap("relock's lock types run with their defaults: a held lock's lease is renewed in the "+
		"background, and waiters are woken by Redis pub/sub. Every measurement: -full; "+
		"every figure as JSON: -json; the project's performance targets: -targets.", 0, summaryWidth))
}

// writeChecks says whether mutual exclusion held, and which measurements
// failed or stalled (one entry per kind and reason).
func (r *Report) writeChecks(b *strings.Builder) {
	checked := 0
	var broken []string
	type problem struct{ kind, why string }
	var problems []problem
	labels := map[problem][]string{}
	for i := range r.Results {
		res := &r.Results[i]
		if res.Contention != nil || res.ReadHeavy != nil || (res.ServerCost != nil && res.ServerCost.Contended != nil) {
			checked++
		}
		if res.Violations > 0 {
			broken = append(broken, fmt.Sprintf("%s (%s): %d times", res.Kind, res.Label(), res.Violations))
		}
		var p problem
		switch {
		case res.Err != "":
			p = problem{res.Kind, res.Err}
		case res.Stalled:
			p = problem{res.Kind, "stalled: " + stallDetail(res)}
		default:
			continue
		}
		if _, ok := labels[p]; !ok {
			problems = append(problems, p)
		}
		labels[p] = append(labels[p], res.Label())
	}
	switch {
	case len(broken) > 0:
		b.WriteString(wrap("MUTUAL EXCLUSION VIOLATED (two owners inside one lock at once): "+strings.Join(broken, "; "), 0, summaryWidth))
	case checked > 0:
		b.WriteString(wrap(fmt.Sprintf("Mutual exclusion held: no two owners were ever inside one lock at once "+
			"(checked in all %d measurements with owners contending).", checked), 0, summaryWidth))
	}
	if len(problems) > 0 {
		b.WriteString("Failed or stalled:\n")
		for _, p := range problems {
			b.WriteString(wrapHang(fmt.Sprintf("%s (%s): %s", p.kind, strings.Join(labels[p], ", "), p.why), 2, 4, summaryWidth))
		}
	}
}

package bench

import (
	"fmt"
	"slices"
	"strings"
)

// ratioMetric is one figure compared between relock and a peer.
type ratioMetric struct {
	name   string
	higher bool // higher is better
	value  func(r *Result) (float64, bool)
}

var ratioMetrics = []ratioMetric{
	{name: "cycle p50", value: func(r *Result) (float64, bool) { return float64(r.Latency.P50), r.Latency.N > 0 }},
	{name: "commands/op", value: func(r *Result) (float64, bool) { return r.CmdsPerOp, r.Ops > 0 }},
	// Over each kind's own floor, measured interleaved with it: steadier
	// than the raw ratio on a noisy machine, where kinds run minutes apart.
	{name: "cycle p50 / own floor", value: func(r *Result) (float64, bool) {
		if r.Uncontended == nil {
			return 0, false
		}
		return r.Uncontended.RatioP50, true
	}},
	{name: "p50 / own pushed floor", value: func(r *Result) (float64, bool) {
		if r.Handoff == nil || r.Latency.N == 0 {
			return 0, false
		}
		return r.Handoff.RatioP50, true
	}},
	{name: "p50", value: func(r *Result) (float64, bool) { return float64(r.Latency.P50), r.Latency.N > 0 }},
	{name: "p99", value: func(r *Result) (float64, bool) { return float64(r.Latency.P99), r.Latency.N > 0 }},
	{name: "acquisitions/s", higher: true, value: func(r *Result) (float64, bool) { return r.OpsPerSec, r.Ops > 0 }},
	{name: "cycles/s", higher: true, value: func(r *Result) (float64, bool) { return r.OpsPerSec, r.Ops > 0 }},
	{name: "cycles/s / own floor", higher: true, value: func(r *Result) (float64, bool) {
		if r.ManyLocks == nil {
			return 0, false
		}
		return r.ManyLocks.Ratio, true
	}},
	{name: "wait p99", value: func(r *Result) (float64, bool) {
		if r.Contention == nil || r.Contention.Wait.N == 0 {
			return 0, false
		}
		return float64(r.Contention.Wait.P99), true
	}},
	{name: "Jain index", higher: true, value: func(r *Result) (float64, bool) {
		if r.Contention == nil || r.Ops == 0 {
			return 0, false
		}
		return r.Contention.Jain, true
	}},
	{name: "commands/s per held lock", value: func(r *Result) (float64, bool) {
		if r.Watchdog == nil || r.Watchdog.Locks == 0 {
			return 0, false
		}
		return r.Watchdog.CmdsPerSec / float64(r.Watchdog.Locks), true
	}},
	{name: "client bytes/lock", value: func(r *Result) (float64, bool) {
		if r.Watchdog == nil {
			return 0, false
		}
		return r.Watchdog.BytesPerLock, true
	}},
	{name: "Redis bytes/lock", value: func(r *Result) (float64, bool) {
		if r.Memory == nil {
			return 0, false
		}
		return r.Memory.BytesPerLock, true
	}},
}

// metricsFor names the metrics compared in a scenario.
func metricsFor(scenario string) []string {
	switch scenario {
	case ScenarioUncontended:
		return []string{"cycle p50", "cycle p50 / own floor", "commands/op"}
	case ScenarioHandoff:
		return []string{"p50", "p50 / own pushed floor", "p99", "commands/op"}
	case ScenarioHandoffContended:
		return []string{"p50", "p99", "acquisitions/s", "commands/op"}
	case ScenarioContention:
		return []string{"acquisitions/s", "wait p99", "Jain index", "commands/op"}
	case ScenarioManyLocks:
		return []string{"cycles/s", "cycles/s / own floor", "commands/op"}
	case ScenarioWatchdog:
		return []string{"commands/s per held lock", "client bytes/lock"}
	case ScenarioMemory:
		return []string{"Redis bytes/lock"}
	}
	return nil
}

// writeRatios writes relock's base kind over each peer, per scenario and
// metric, when the report has peers.
func (r *Report) writeRatios(b *strings.Builder) {
	base := r.Base
	var peers []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Peer && res.Masters == 0 && !seen[res.Kind] {
			seen[res.Kind] = true
			peers = append(peers, res.Kind)
		}
	}
	if len(peers) == 0 || base == "" {
		return
	}
	find := func(kind, label string) *Result {
		for i := range r.Results {
			if res := &r.Results[i]; res.Kind == kind && res.Label() == label {
				return res
			}
		}
		return nil
	}
	b.WriteString("\n" + wrap(fmt.Sprintf("Ratios %s / peer (same run, same server). Lower is better for relock, "+
		"except for the metrics marked +, where higher is better.", base), 0, reportWidth))
	right := []bool{false, false}
	for range peers {
		right = append(right, true)
	}
	t := &table{right: right}
	t.add(append([]string{"SCENARIO", "METRIC"}, peers...)...)
	var labels []string
	seenLabel := map[string]bool{}
	for _, res := range r.Results {
		if res.Kind == base && !seenLabel[res.Label()] {
			seenLabel[res.Label()] = true
			labels = append(labels, res.Label())
		}
	}
	for _, label := range labels {
		bres := find(base, label)
		for _, name := range metricsFor(bres.Scenario) {
			m := metricByName(name)
			if m.higher {
				name += " +"
			}
			cells := []string{label, name}
			for _, p := range peers {
				cells = append(cells, ratioCell(bres, find(p, label), m))
			}
			t.add(cells...)
		}
	}
	t.write(b, 4)
}

func metricByName(name string) ratioMetric {
	for _, m := range ratioMetrics {
		if m.name == name {
			return m
		}
	}
	panic("bench: unknown metric " + name)
}

// ratioCell is base/peer for metric m, or why there is none.
func ratioCell(base, peer *Result, m ratioMetric) string {
	switch {
	case peer == nil:
		return "-"
	case peer.Skipped != "":
		return "n/a"
	case peer.Err != "" && peer.Stalled:
		return "stalled"
	case peer.Err != "":
		return "error"
	case base.Err != "" || base.Skipped != "":
		return "-"
	}
	bv, ok1 := m.value(base)
	pv, ok2 := m.value(peer)
	if !ok1 || !ok2 || pv == 0 {
		return "-"
	}
	s := ratio(bv / pv)
	if peer.Stalled {
		s += " (stalled)"
	}
	return s
}

// writeMultiRatios writes each multi-master relock kind over the peers of
// as many masters (redsync/redlock-5 for relock/redlock-5), per scenario
// and metric: one column per peer library, one row per relock kind,
// scenario and metric.
func (r *Report) writeMultiRatios(b *strings.Builder) {
	family := func(kind string) string {
		if i := strings.LastIndex(kind, "-"); i > 0 {
			return kind[:i]
		}
		return kind
	}
	var fams, kinds []string
	for _, res := range r.Results {
		switch {
		case res.Masters == 0:
		case res.Peer && !slices.Contains(fams, family(res.Kind)):
			fams = append(fams, family(res.Kind))
		case !res.Peer && !slices.Contains(kinds, res.Kind):
			kinds = append(kinds, res.Kind)
		}
	}
	if len(fams) == 0 || len(kinds) == 0 {
		return
	}
	find := func(masters int, fam, label string) *Result {
		for i := range r.Results {
			res := &r.Results[i]
			if res.Peer && res.Masters == masters && family(res.Kind) == fam && res.Label() == label {
				return res
			}
		}
		return nil
	}
	b.WriteString("\n" + wrap("Ratios of the multi-master kinds over the peers on as many masters (same run, same "+
		"servers). Lower is better for relock.", 0, reportWidth))
	right := []bool{false, false, false}
	for range fams {
		right = append(right, true)
	}
	t := &table{right: right}
	t.add(append([]string{"KIND", "SCENARIO", "METRIC"}, fams...)...)
	for _, kind := range kinds {
		for i := range r.Results {
			res := &r.Results[i]
			if res.Kind != kind || res.Skipped != "" {
				continue
			}
			for _, name := range metricsFor(res.Scenario) {
				m := metricByName(name)
				if m.higher {
					name += " +"
				}
				cells := []string{kind, res.Label(), name}
				for _, f := range fams {
					cells = append(cells, ratioCell(res, find(res.Masters, f, res.Label()), m))
				}
				t.add(cells...)
			}
		}
	}
	t.write(b, 4)
}

// writeClusterRatios writes each cluster kind over the same lock type on
// the single server, per scenario and metric.
func (r *Report) writeClusterRatios(b *strings.Builder) {
	t := &table{right: []bool{false, false, false, true}}
	t.add("KIND", "SCENARIO", "METRIC", "CLUSTER/SINGLE")
	rows := 0
	for i := range r.Results {
		res := &r.Results[i]
		single := singleKind(res)
		if single == "" || res.Skipped != "" {
			continue
		}
		var sres *Result
		for j := range r.Results {
			if o := &r.Results[j]; o.Kind == single && o.Cluster == 0 && o.Label() == res.Label() {
				sres = o
			}
		}
		for _, name := range metricsFor(res.Scenario) {
			m := metricByName(name)
			t.add(res.Kind, res.Label(), name, ratioCell(res, sres, m))
			rows++
		}
	}
	if rows == 0 {
		return
	}
	b.WriteString("\n" + wrap("Ratios of the cluster kinds over the same lock type on the single server (same run). "+
		"Each is over its own floor where the metric says so: the cluster's for the cluster kind.", 0, reportWidth))
	t.write(b, 4)
}

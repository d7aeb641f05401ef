package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// result is what one run found.
type result struct {
	kind, lease string
	took        time.Duration // the workload, faults included
	workers     int           // processes started (killed ones are replaced)
	v           verdict
	faults      map[string]int
	faultLog    []string
	samples     int // TTL samples
	sampledKeys int // keys seen, summed over the samples
	noTTL       []string
	leftovers   []string
	losses      map[string]int // holds lost, by why
	failures    map[string]int // acquire calls that failed, by why
}

// summary adds up the results of the runs of a test.
type summary struct{ runs []result }

func (s *summary) add(r result) { s.runs = append(s.runs, r) }

// table is the per-run table, with the totals last.
func (s *summary) table() string {
	var b strings.Builder
	b.WriteString("| lock | lease | run | workers | acquisitions | faults | violations | stale-holder overlaps (token lower) | overstay overlaps | overlaps after data loss | fence regressions expected / unexpected | held across an AOF restart | lost before their lease | keys without TTL (samples) | left over | holds lost expired / gone | acquires failed |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var tot result
	tot.kind, tot.lease = "all", ""
	tot.faults, tot.losses, tot.failures = map[string]int{}, map[string]int{}, map[string]int{}
	for _, r := range s.runs {
		b.WriteString(r.row())
		tot.took += r.took
		tot.workers += r.workers
		tot.v.holds += r.v.holds
		tot.v.violations = append(tot.v.violations, r.v.violations...)
		tot.v.stale = append(tot.v.stale, r.v.stale...)
		tot.v.overstay = append(tot.v.overstay, r.v.overstay...)
		tot.v.afterLoss = append(tot.v.afterLoss, r.v.afterLoss...)
		tot.v.fenceBack = append(tot.v.fenceBack, r.v.fenceBack...)
		tot.v.spanned += r.v.spanned
		tot.v.goneAfterRetry += r.v.goneAfterRetry
		tot.v.lostEarly = append(tot.v.lostEarly, r.v.lostEarly...)
		tot.v.fenceLoss += r.v.fenceLoss
		tot.v.staleFenced += r.v.staleFenced
		tot.v.staleFencedOf += r.v.staleFencedOf
		tot.samples += r.samples
		tot.noTTL = append(tot.noTTL, r.noTTL...)
		tot.leftovers = append(tot.leftovers, r.leftovers...)
		for k, n := range r.faults {
			tot.faults[k] += n
		}
		for k, n := range r.losses {
			tot.losses[k] += n
		}
		for k, n := range r.failures {
			tot.failures[k] += n
		}
	}
	if len(s.runs) > 1 {
		b.WriteString(tot.row())
	}
	b.WriteString("\nfaults injected, by kind:\n\n| fault | injected |\n|---|---|\n")
	for _, k := range append(append([]string(nil), workerFaults...), serverFaults...) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, tot.faults[k])
	}
	fmt.Fprintf(&b, "| all | %d |\n", sum(tot.faults))
	return b.String()
}

func (r result) row() string {
	fenced := ""
	if r.v.staleFencedOf > 0 {
		fenced = fmt.Sprintf(" (%d of %d)", r.v.staleFenced, r.v.staleFencedOf)
	}
	return fmt.Sprintf("| %s | %s | %v | %d | %d | %d | %d | %d%s | %d | %d | %d / %d | %d | %d | %d (%d) | %d | %d / %d | %d |\n",
		r.kind, r.lease, r.took.Round(time.Second), r.workers, r.v.holds, sum(r.faults),
		len(r.v.violations), len(r.v.stale), fenced, len(r.v.overstay), len(r.v.afterLoss),
		r.v.fenceLoss, len(r.v.fenceBack), r.v.spanned, len(r.v.lostEarly), len(r.noTTL), r.samples, len(r.leftovers),
		r.losses["expired"], r.losses["gone"], sum(r.failures))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// counts formats a map of counts as "a=1 b=2", in key order.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

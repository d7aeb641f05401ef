package bench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/internal/redistest"
)

// TestCluster runs relock's kinds on a real Redis Cluster of three masters
// (-cluster): uncontended and hand-off rows for each, beside the
// single-server rows (miniredis here), with floors measured on the
// cluster, no other scenario and no single-server target.
func TestCluster(t *testing.T) {
	redistest.Parallel(t)
	c := redistest.RealCluster(t)
	var out, errs bytes.Buffer
	file := filepath.Join(t.TempDir(), "results.json")
	args := []string{"-duration", "100ms", "-handoff-hold", "2ms", "-scenarios", "uncontended,handoff,contention",
		"-contenders", "2", "-cluster", strings.Join(c.Addrs(), ","), "-json-file", file, "-full", "-stall-after", slow.String()}
	if code := bench.Main("relockbench", args, bench.RelockKinds(), &out, &errs); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	rows := map[string]bool{} // the first two and three words of each line
	for _, line := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("table line of %d columns, want at most 100:\n%s", n, line)
		}
		if f := strings.Fields(line); len(f) >= 3 {
			rows[f[0]+" "+f[1]], rows[f[0]+" "+f[1]+" "+f[2]] = true, true
		}
	}

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	if !strings.Contains(rep.Meta.Cluster, "cluster of 3 masters") {
		t.Errorf("meta cluster: got %q, want a cluster of 3 masters", rep.Meta.Cluster)
	}
	results := map[string]bench.Result{}
	for _, r := range rep.Results {
		results[r.Label()+" "+r.Kind] = r
	}
	for _, k := range bench.RelockKinds() {
		if len(k.Only) > 0 {
			continue // no cluster kind: it runs no scenario of theirs
		}
		kind := k.Name + "@cluster"
		for _, s := range []string{bench.ScenarioUncontended, bench.ScenarioHandoff} {
			r, found := results[s+" "+kind]
			if !found {
				t.Errorf("no %s result for %s", s, kind)
				continue
			}
			ok(t, r)
			if r.Cluster != 3 || r.Masters != 0 {
				t.Errorf("%s %s: cluster masters %d, masters %d; want 3, 0", kind, s, r.Cluster, r.Masters)
			}
			if len(r.Targets) > 0 {
				t.Errorf("%s %s held to single-server targets: %+v", kind, s, r.Targets)
			}
			if u := r.Uncontended; u != nil && (!u.SameClient || u.Floor.N == 0 || u.RatioP50 == 0) {
				t.Errorf("%s uncontended: floor %+v on the same cluster client %v, ratio %v; want a floor on it", kind, u.Floor, u.SameClient, u.RatioP50)
			}
			if h := r.Handoff; h != nil && (h.Floor.N == 0 || h.ScriptFloor.N == 0 || h.RTT == 0 || h.IdleRTT == 0) {
				t.Errorf("%s handoff: floor n=%d, script floor n=%d, RTT %v, idle RTT %v; want both floors and both RTTs",
					kind, h.Floor.N, h.ScriptFloor.N, h.RTT, h.IdleRTT)
			}
			if !rows[s+" "+kind] {
				t.Errorf("table lacks a row for %s %s:\n%s", s, kind, table)
			}
			if !rows[kind+" "+s+" p50"] && !rows[kind+" "+s+" cycle"] {
				t.Errorf("cluster ratios lack %s %s:\n%s", kind, s, table)
			}
		}
		if r := results["contention c=2 "+kind]; r.Skipped == "" {
			t.Errorf("contention for %s: got %+v, want skipped", kind, r)
		}
	}
	if got := results["uncontended relock/mutex@cluster"].CmdsPerOp; got != 2 {
		t.Errorf("relock/mutex@cluster uncontended commands per cycle: got %v, want 2", got)
	}
	if !strings.Contains(table, "Ratios of the cluster kinds") {
		t.Errorf("table lacks the cluster ratios:\n%s", table)
	}
}

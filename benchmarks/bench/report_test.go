package bench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relock-go/relock/benchmarks/bench"
	"github.com/relock-go/relock/internal/redistest"
)

// widest returns the widest line of s and its width.
func widest(s string) (string, int) {
	line, n := "", 0
	for _, l := range strings.Split(s, "\n") {
		if w := utf8.RuneCountInString(l); w > n {
			line, n = l, w
		}
	}
	return line, n
}

// commitID matches what looks like a git commit id: 7 to 40 hex digits
// with at least one letter among them.
var commitID = regexp.MustCompile(`\b[0-9a-f]*[a-f][0-9a-f]*\b`)

// TestDefaultReport runs the command line as a user first runs it (no
// flag but a shorter measurement): the quick tour on the embedded
// miniredis. The report must fit 80 columns, say that the figures are not
// Redis figures, show every lock type with a line explaining each column,
// and speak of no target, issue, commit or internal term; the progress
// on stderr shows the time elapsed and an estimate of what is left.
func TestDefaultReport(t *testing.T) {
	redistest.Parallel(t)
	var out, errs bytes.Buffer
	file := filepath.Join(t.TempDir(), "results.json")
	if code := bench.Main("relockbench", []string{"-duration", "100ms", "-json-file", file, "-stall-after", slow.String()}, bench.RelockKinds(), &out, &errs); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs.String())
	}
	report := out.String()
	if line, n := widest(report); n > 80 {
		t.Errorf("report line of %d columns, want at most 80:\n%s\nreport:\n%s", n, line, report)
	}
	for _, want := range []string{"NOT Redis figures", "LOCK", "CYCLE", "MANY LOCKS", "HAND-OFF", "BUSY LOCK",
		"Mutual exclusion held", "go -C benchmarks/peers run .", "-targets", "-full"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// One line explaining each column, at the start of a line.
	for _, col := range []string{"CYCLE", "MANY LOCKS", "HAND-OFF", "BUSY LOCK"} {
		if !regexp.MustCompile(`(?m)^` + col + ` +\S`).MatchString(report) {
			t.Errorf("report has no line explaining %s:\n%s", col, report)
		}
	}
	// The flag that shows the targets may be named; no target may be.
	lower := strings.ToLower(strings.ReplaceAll(report, "the project's performance targets: -targets", ""))
	for _, jargon := range []string{"issue", "target", "missed", "met ", "pushed floor", "floor", "jain", "idle rtt", "evalsha", "cmds/op"} {
		if strings.Contains(lower, jargon) {
			t.Errorf("report speaks of %q:\n%s", jargon, report)
		}
	}
	for _, m := range commitID.FindAllString(report, -1) {
		if len(m) >= 7 {
			t.Errorf("report holds %q, which looks like a commit id:\n%s", m, report)
		}
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(report, "\n") {
		if f := strings.Fields(line); len(f) == 5 {
			rows[f[0]] = true
		}
	}
	for _, k := range bench.RelockKinds() {
		if len(k.Only) > 0 {
			continue // measured for its server cost only, on a real server
		}
		if !rows[k.Name] {
			t.Errorf("report has no row of 5 cells for %s:\n%s", k.Name, report)
		}
	}
	if !strings.Contains(errs.String(), "NOT Redis figures") {
		t.Errorf("stderr does not say up front that miniredis figures are not Redis figures:\n%s", errs.String())
	}
	if !regexp.MustCompile(`\[ ?\d+/\d+\] .*\(\d+s elapsed, about \d+s left\)`).MatchString(errs.String()) {
		t.Errorf("stderr lacks progress with elapsed time and time left:\n%s", errs.String())
	}

	// The quick tour: the summary's scenarios, 16 contenders.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	for _, r := range rep.Results {
		if !slices.Contains(bench.QuickScenarios, r.Scenario) {
			t.Errorf("quick tour measured %s %s, not one of %v", r.Kind, r.Label(), bench.QuickScenarios)
		}
		if r.Scenario == bench.ScenarioContention && r.Contenders != 16 {
			t.Errorf("quick tour: contention with %d contenders, want 16", r.Contenders)
		}
		ok(t, r)
	}
	if got, want := len(rep.Results), len(bench.QuickScenarios)*5; got != want {
		t.Errorf("quick tour: %d results, want %d", got, want)
	}

	// -targets prints them, met or MISSED with their figures, after the
	// same summary; -full adds every measurement.
	var again bytes.Buffer
	if code := bench.Main("relockbench", []string{"-from-json", file, "-targets", "-full"}, nil, &again, &errs); code != 0 {
		t.Fatalf("-from-json -targets: exit %d; stderr:\n%s", code, errs.String())
	}
	text := again.String()
	if !strings.HasPrefix(text, report[:strings.Index(report, "\n")]) {
		t.Errorf("-targets report does not open with the summary:\n%s", text)
	}
	for _, want := range []string{"Every measurement", "Targets (", "relock/mutex uncontended: exactly 2 commands per cycle",
		"relock/mutex many-locks: cycles/s at least 0.9x SET NX PX + DEL"} {
		if !strings.Contains(text, want) {
			t.Errorf("-full -targets report lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`(?m)^  (met   |MISSED)  relock/`).MatchString(text) {
		t.Errorf("-targets prints no met/MISSED line:\n%s", text)
	}
	if line, n := widest(text); n > 100 {
		t.Errorf("-full -targets line of %d columns, want at most 100:\n%s", n, line)
	}
}

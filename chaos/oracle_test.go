package chaos

import (
	"testing"
	"time"
)

// The judge must be able to fail: these cases give it synthetic records.

const ms = int64(time.Millisecond)

// h makes a hold of worker w on lock "L", acquired at from ms, inside from
// from to to (ms).
func h(id, w string, mode byte, n int, from, to int64) *hold {
	return &hold{id: id, worker: w, lock: "L", mode: mode, n: n,
		start: from*ms - ms, acq: from * ms, enter: from * ms, leave: to * ms}
}

func fenced(x *hold, f int64) *hold { x.fence = f; return x }

// waited makes x's acquire call start at 0 ms, long before it returned.
func waited(x *hold) *hold { x.start = 0; return x }

// unlocked sets the outcome of x's unlock.
func unlocked(x *hold, outcome string) *hold { x.unlock = outcome; return x }

// lost marks x as told of its loss at ms.
func lost(x *hold, at int64) *hold { x.lost, x.why, x.lostAt = true, "expired", at*ms; return x }

func TestJudge(t *testing.T) {
	exclusiveRules := rules{capacity: 1, pauseMin: 250 * time.Millisecond, late: 50 * time.Millisecond}
	starved := evidence{pauses: map[string][]window{"a": {{100 * ms, 160 * ms}}}}
	noEvidence := evidence{}
	stopped := evidence{pauses: map[string][]window{"a": {{100 * ms, 1000 * ms}}}}
	stalledEarly := evidence{pauses: map[string][]window{"a": {{20 * ms, 60 * ms}}}}
	briefly := evidence{pauses: map[string][]window{"a": {{100 * ms, 150 * ms}}}}
	restart := evidence{losses: []dataLoss{{window: window{200 * ms, 300 * ms}}}}
	deleted := evidence{losses: []dataLoss{{lock: "L", window: window{200 * ms, 200 * ms}}}}
	deletedOther := evidence{losses: []dataLoss{{lock: "M", window: window{200 * ms, 200 * ms}}}}
	tests := []struct {
		name  string
		holds []*hold
		ev    evidence
		rules rules
		// want: violations, stale, overstay, after loss, fence back, fence loss
		want [6]int
	}{
		{"one after the other", []*hold{h("1", "a", 'x', 1, 0, 10), h("2", "b", 'x', 1, 10, 20)}, noEvidence, exclusiveRules, [6]int{}},
		{"overlap", []*hold{h("1", "a", 'x', 1, 0, 10), h("2", "b", 'x', 1, 5, 20)}, noEvidence, exclusiveRules, [6]int{1}},
		{"nested overlaps", []*hold{h("1", "a", 'x', 1, 0, 100), h("2", "b", 'x', 1, 5, 10), h("3", "c", 'x', 1, 20, 30)}, noEvidence, exclusiveRules, [6]int{2}},
		{"stale holder", []*hold{h("1", "a", 'x', 1, 50, 1010), h("2", "b", 'x', 1, 600, 620)}, stopped, exclusiveRules, [6]int{0, 1}},
		{"a brief pause explains nothing", []*hold{h("1", "a", 'x', 1, 50, 1010), h("2", "b", 'x', 1, 600, 620)}, briefly, exclusiveRules, [6]int{1}},
		{"a pause while waiting explains nothing", []*hold{h("1", "a", 'x', 1, 50, 1010), waited(h("2", "b", 'x', 1, 1200, 1300)), h("3", "c", 'x', 1, 1210, 1220)}, evidence{pauses: map[string][]window{"b": {{100 * ms, 1000 * ms}}}}, exclusiveRules, [6]int{1}},
		{"a pause before the hold explains nothing", []*hold{h("1", "a", 'x', 1, 1100, 1200), h("2", "b", 'x', 1, 1150, 1160)}, stopped, exclusiveRules, [6]int{1}},
		{"told before the other entered", []*hold{lost(h("1", "a", 'x', 1, 0, 300), 100), h("2", "b", 'x', 1, 120, 130)}, noEvidence, exclusiveRules, [6]int{0, 0, 1}},
		{"told a little after the other entered", []*hold{lost(h("1", "a", 'x', 1, 0, 300), 100), h("2", "b", 'x', 1, 70, 80)}, noEvidence, exclusiveRules, [6]int{0, 0, 1}},
		{"told long after the other entered", []*hold{lost(h("1", "a", 'x', 1, 0, 300), 200), h("2", "b", 'x', 1, 70, 80)}, noEvidence, exclusiveRules, [6]int{1}},
		{"told late by a stalled process", []*hold{lost(h("1", "a", 'x', 1, 0, 300), 200), h("2", "b", 'x', 1, 70, 80)}, starved, exclusiveRules, [6]int{0, 1}},
		{"a stall before the other entered explains no late Lost", []*hold{lost(h("1", "a", 'x', 1, 0, 300), 200), h("2", "b", 'x', 1, 70, 80)}, stalledEarly, exclusiveRules, [6]int{1}},
		{"restart without persistence", []*hold{h("1", "a", 'x', 1, 100, 400), h("2", "b", 'x', 1, 350, 360)}, restart, exclusiveRules, [6]int{0, 0, 0, 1}},
		{"acquired after the restart", []*hold{h("1", "a", 'x', 1, 350, 400), h("2", "b", 'x', 1, 360, 370)}, restart, exclusiveRules, [6]int{1}},
		{"waited across the restart, granted after it", []*hold{unlocked(waited(h("1", "a", 'x', 1, 350, 400)), "ok"), h("2", "b", 'x', 1, 360, 370)}, restart, exclusiveRules, [6]int{1}},
		{"held across the restart, lost it", []*hold{unlocked(h("1", "a", 'x', 1, 100, 400), "notheld-gone"), h("2", "b", 'x', 1, 350, 360)}, restart, exclusiveRules, [6]int{0, 0, 0, 1}},
		{"granted before a deleted key, its reply late", []*hold{unlocked(h("1", "a", 'x', 1, 210, 230), "ok"), unlocked(waited(h("2", "b", 'x', 1, 220, 225)), "notheld-gone")}, deleted, exclusiveRules, [6]int{0, 0, 0, 1}},
		{"granted before a deleted key, kept it", []*hold{unlocked(h("1", "a", 'x', 1, 210, 230), "ok"), unlocked(waited(h("2", "b", 'x', 1, 220, 225)), "ok")}, deleted, exclusiveRules, [6]int{1}},
		{"held across the restart, kept it", []*hold{unlocked(h("1", "a", 'x', 1, 100, 400), "ok"), h("2", "b", 'x', 1, 350, 360)}, restart, exclusiveRules, [6]int{1}},
		{"permits kept across the restart", []*hold{unlocked(h("1", "a", 'p', 2, 100, 400), "ok"), h("2", "b", 'p', 2, 350, 360)}, restart, rules{capacity: 3}, [6]int{1}},
		{"permits lost in the restart", []*hold{unlocked(h("1", "a", 'p', 2, 100, 400), "notheld-gone"), h("2", "b", 'p', 2, 350, 360)}, restart, rules{capacity: 3}, [6]int{0, 0, 0, 1}},
		{"deleted key", []*hold{h("1", "a", 'x', 1, 100, 400), h("2", "b", 'x', 1, 250, 260)}, deleted, exclusiveRules, [6]int{0, 0, 0, 1}},
		{"another lock's key deleted", []*hold{h("1", "a", 'x', 1, 100, 400), h("2", "b", 'x', 1, 250, 260)}, deletedOther, exclusiveRules, [6]int{1}},
		{"readers overlap", []*hold{h("1", "a", 'r', 1, 0, 10), h("2", "b", 'r', 1, 5, 20), h("3", "c", 'r', 1, 6, 7)}, noEvidence, exclusiveRules, [6]int{}},
		{"writer in readers", []*hold{h("1", "a", 'r', 1, 0, 10), h("2", "b", 'r', 1, 5, 20), h("3", "c", 'w', 1, 6, 7)}, noEvidence, exclusiveRules, [6]int{2}},
		{"reader in a writer", []*hold{h("1", "a", 'w', 1, 0, 10), h("2", "b", 'r', 1, 5, 20)}, noEvidence, exclusiveRules, [6]int{1}},
		{"writers", []*hold{h("1", "a", 'w', 1, 0, 10), h("2", "b", 'w', 1, 5, 20)}, noEvidence, exclusiveRules, [6]int{1}},
		{"permits within capacity", []*hold{h("1", "a", 'p', 2, 0, 10), h("2", "b", 'p', 1, 5, 20)}, noEvidence, rules{capacity: 3}, [6]int{}},
		{"one permit too many", []*hold{h("1", "a", 'p', 2, 0, 10), h("2", "b", 'p', 1, 5, 20), h("3", "c", 'p', 1, 6, 8)}, noEvidence, rules{capacity: 3}, [6]int{1}},
		{"N+1 holders", []*hold{h("1", "a", 'p', 1, 0, 10), h("2", "b", 'p', 1, 1, 20), h("3", "c", 'p', 1, 2, 8), h("4", "d", 'p', 1, 3, 4)}, noEvidence, rules{capacity: 3}, [6]int{1}},
		{"a permit holder paused", []*hold{h("1", "a", 'p', 1, 50, 1010), h("2", "b", 'p', 2, 600, 620), h("3", "c", 'p', 1, 601, 610)}, stopped, rules{capacity: 3, pauseMin: 250 * time.Millisecond}, [6]int{0, 1}},
		{"a permit holder told", []*hold{lost(h("1", "a", 'p', 1, 50, 1010), 500), h("2", "b", 'p', 2, 600, 620), h("3", "c", 'p', 1, 601, 610)}, noEvidence, rules{capacity: 3, late: 50 * time.Millisecond}, [6]int{0, 0, 1}},
		{"a permit holder told too late", []*hold{lost(h("1", "a", 'p', 1, 50, 1010), 800), h("2", "b", 'p', 2, 600, 620), h("3", "c", 'p', 1, 601, 610)}, noEvidence, rules{capacity: 3, late: 50 * time.Millisecond}, [6]int{1}},
		{"more permits than a pause explains", []*hold{h("1", "a", 'p', 1, 50, 1010), h("2", "b", 'p', 2, 600, 620), h("3", "c", 'p', 2, 601, 610)}, stopped, rules{capacity: 3, pauseMin: 250 * time.Millisecond}, [6]int{1}},
		{"tokens increase", []*hold{fenced(h("1", "a", 'x', 1, 0, 10), 1), fenced(h("2", "b", 'x', 1, 10, 20), 2)}, noEvidence, exclusiveRules, [6]int{}},
		{"token goes back", []*hold{fenced(h("1", "a", 'x', 1, 0, 10), 2), fenced(h("2", "b", 'x', 1, 10, 20), 2)}, noEvidence, exclusiveRules, [6]int{0, 0, 0, 0, 1}},
		{"token goes back after a restart", []*hold{fenced(h("1", "a", 'x', 1, 0, 10), 7), fenced(h("2", "b", 'x', 1, 350, 360), 1), fenced(h("3", "b", 'x', 1, 360, 370), 2)}, restart, exclusiveRules, [6]int{0, 0, 0, 0, 0, 1}},
		{"stale holder's lower token", []*hold{fenced(h("1", "a", 'x', 1, 50, 1010), 4), fenced(h("2", "b", 'x', 1, 600, 620), 5)}, stopped, exclusiveRules, [6]int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := judge(tt.holds, tt.ev, tt.rules)
			got := [6]int{len(v.violations), len(v.stale), len(v.overstay), len(v.afterLoss), len(v.fenceBack), v.fenceLoss}
			if got != tt.want {
				t.Errorf("got violations, stale, late, after loss, fence back, fence loss = %v, want %v", got, tt.want)
				for _, f := range append(append(v.violations, v.stale...), v.fenceBack...) {
					t.Log(f)
				}
			}
		})
	}
}

// TestJudgeOpenHolds: a hold whose process died inside lasts until its
// death, and no longer.
func TestJudgeOpenHolds(t *testing.T) {
	a := h("1", "a", 'x', 1, 0, 0) // no leave line
	b := h("2", "b", 'x', 1, 600, 610)
	ev := evidence{deaths: map[string]int64{"a": 100 * ms}, end: 2000 * ms}
	if v := judge([]*hold{a, b}, ev, rules{capacity: 1}); len(v.violations) != 0 || !a.open || a.leave != 100*ms {
		t.Fatalf("killed holder: %d violations, open %v, leave %d", len(v.violations), a.open, a.leave)
	}
	a, b = h("1", "a", 'x', 1, 0, 0), h("2", "b", 'x', 1, 600, 610)
	ev.deaths = nil
	if v := judge([]*hold{a, b}, ev, rules{capacity: 1}); len(v.violations) != 1 {
		t.Fatalf("a holder inside until the end: %d violations, want 1", len(v.violations))
	}
	if v := judge([]*hold{h("1", "a", 'x', 1, 50, 1010), fenced(h("2", "b", 'x', 1, 600, 620), 5)}, evidence{pauses: map[string][]window{"a": {{100 * ms, 1000 * ms}}}}, rules{capacity: 1, pauseMin: time.Millisecond}); v.staleFencedOf != 0 {
		t.Fatalf("counted an unfenced stale overlap as fenced")
	}
}

// TestJudgeKept: a hold must keep its key for the lease its acquire gave
// it, across a restart with persistence too.
func TestJudgeKept(t *testing.T) {
	ev := evidence{kept: []window{{100 * ms, 200 * ms}}}
	r := rules{capacity: 1, minTTL: 490 * time.Millisecond}
	kept, after := h("1", "a", 'x', 1, 50, 300), h("3", "c", 'x', 1, 150, 300)
	kept.unlock, kept.unlocked = "ok", 301*ms
	v := judge([]*hold{kept, after}, ev, r)
	if v.spanned != 1 || len(v.lostEarly) != 0 {
		t.Fatalf("kept: spanned %d, lost %d; want 1, 0", v.spanned, len(v.lostEarly))
	}
	gone := h("2", "b", 'x', 1, 60, 300)
	gone.unlock, gone.unlocked = "notheld-gone", 301*ms
	if v = judge([]*hold{gone}, ev, r); len(v.lostEarly) != 1 {
		t.Fatalf("gone after the restart: lost %d; want 1", len(v.lostEarly))
	}
	gone = h("2", "b", 'x', 1, 60, 300)
	gone.unlock, gone.unlocked = "notheld-gone", 700*ms // its lease had run out: legitimate
	if v = judge([]*hold{gone}, ev, r); len(v.lostEarly) != 0 {
		t.Fatalf("gone after its lease: lost %d; want 0", len(v.lostEarly))
	}
	retried := h("2", "b", 'x', 1, 60, 300)
	retried.unlock, retried.unlocked, retried.tries = "notheld-gone", 301*ms, 2
	if v = judge([]*hold{retried}, ev, r); len(v.lostEarly) != 0 || v.goneAfterRetry != 1 {
		t.Fatalf("gone after an unlock with a lost reply: lost %d, counted %d; want 0, 1", len(v.lostEarly), v.goneAfterRetry)
	}
	told := lost(h("4", "d", 'x', 1, 10, 300), 250)
	told.why = "gone"
	if v = judge([]*hold{told}, evidence{}, r); len(v.lostEarly) != 1 {
		t.Fatalf("Lost fired gone early: lost %d; want 1", len(v.lostEarly))
	}
	told = lost(h("4", "d", 'x', 1, 10, 300), 250)
	told.why = "gone"
	if v = judge([]*hold{told}, evidence{losses: []dataLoss{{lock: "L", window: window{200 * ms, 200 * ms}}}}, r); len(v.lostEarly) != 0 {
		t.Fatalf("Lost fired gone after the key was deleted: lost %d; want 0", len(v.lostEarly))
	}
}

func TestParseLines(t *testing.T) {
	l, err := parseLine("E w1.0.3 chaos-x-0 w 1 100 200 300 7 5000")
	if err != nil {
		t.Fatal(err)
	}
	x, err := enterHold(l)
	if err != nil {
		t.Fatal(err)
	}
	if x.id != "w1.0.3" || x.worker != "w1" || x.lock != "chaos-x-0" || x.mode != 'w' || x.n != 1 ||
		x.start != 100 || x.acq != 200 || x.enter != 300 || x.fence != 7 || x.plan != 5000 {
		t.Fatalf("got %+v", x)
	}
	l, err = parseLine("L w1.0.3 400 1 expired 350 ok")
	if err != nil {
		t.Fatal(err)
	}
	if err := leaveHold(x, l); err != nil || x.leave != 400 || !x.lost || x.why != "expired" || x.lostAt != 350 || x.nested != "ok" {
		t.Fatalf("got %+v, %v", x, err)
	}
	for _, bad := range []string{"", "E w1", "Q a b", "L w1.0.3 x 1 expired 0 -"} {
		l, err := parseLine(bad)
		if err == nil && l.tag == 'L' {
			err = leaveHold(&hold{}, l)
		}
		if err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

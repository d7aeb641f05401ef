package chaos

import (
	"fmt"
	"strconv"
	"strings"
)

// The oracle's line protocol. Every worker process writes one line per
// event to its stdout, a pipe to the test process that no fault touches.
// Times are wall-clock nanoseconds (time.Now().UnixNano()): CLOCK_REALTIME
// is one clock for every process of the host, so the stamps of different
// workers compare, and a stamp taken before an Unlock is earlier than one
// taken after the Lock that the Unlock let through.
//
//	R <worker>                                              started, ready
//	E <hold> <lock> <mode> <n> <start> <acq> <enter> <fence> <plan> entered a critical section
//	L <hold> <leave> <lost> <why> <lostAt> <nested>           left it (before unlocking)
//	U <hold> <outcome> <at> <tries>                           the unlock's outcome, when it returned, after how many calls
//	S <hold> <lock> <why>                                     acquired, but Lost had fired: not entered
//	F <worker> <lock> <why>                                   an acquire call failed
//	P <worker> <from> <to>                                    the worker saw itself paused (no tick for 50 ms or more)
//	B <worker>                                                stopping cleanly
//
// <hold> is <worker>.<owner>.<seq>; <mode> is x (exclusive), r (read), w
// (write) or p (permits, <n> of them); <start> and <acq> are when the
// acquire call began and returned; <plan> is how long the worker means to
// stay inside (nanoseconds; the fault injector aims at long stays); <lost> is 1 if the hold's Lost channel
// had fired when the worker left, <why> its LostErr ("expired", "gone",
// "closed", "-") and <lostAt> when the worker saw it fire (0: it did not);
// <nested> is the outcome of a nested acquire inside the section ("-":
// none, "ok", "notheld-<why>", "notobtained", "err").

// mode of a hold.
const (
	exclusive = 'x'
	read      = 'r'
	write     = 'w'
	permits   = 'p'
)

// hold is one critical section as the oracle knows it.
type hold struct {
	id       string
	worker   string
	lock     string
	mode     byte
	n        int   // permits (1 for the other modes)
	start    int64 // the acquire call began
	acq      int64 // it returned
	enter    int64
	leave    int64 // 0 while open
	fence    int64
	plan     int64  // how long the worker meant to stay inside
	lost     bool   // Lost had fired by the leave
	lostAt   int64  // when the worker saw Lost fire
	why      string // LostErr's class
	nested   string // the outcome of a nested acquire inside
	unlock   string // the unlock's outcome, "" if unknown
	unlocked int64  // when the unlock returned
	tries    int    // Unlock calls it took (more than 1: an earlier one's outcome was unknown)
	open     bool   // no leave line: the process died inside; leave is its death
}

// window is a span of wall-clock time, [from, to].
type window struct{ from, to int64 }

func (w window) overlaps(from, to int64) bool { return w.from <= to && from <= w.to }

// line is one parsed line of a worker.
type line struct {
	tag    byte
	fields []string
}

func parseLine(s string) (line, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f[0]) != 1 {
		return line{}, fmt.Errorf("bad line %q", s)
	}
	want := map[byte]int{'R': 1, 'E': 9, 'L': 6, 'U': 4, 'S': 3, 'F': 3, 'P': 3, 'B': 1}
	n, ok := want[f[0][0]]
	if !ok || len(f)-1 != n {
		return line{}, fmt.Errorf("bad line %q", s)
	}
	return line{tag: f[0][0], fields: f[1:]}, nil
}

// enterHold makes the hold of an E line.
func enterHold(l line) (*hold, error) {
	f := l.fields
	nums, err := ints(f[3], f[4], f[5], f[6], f[7], f[8])
	if err != nil || len(f[2]) != 1 {
		return nil, fmt.Errorf("bad E line %v", f)
	}
	worker, _, _ := strings.Cut(f[0], ".")
	return &hold{id: f[0], worker: worker, lock: f[1], mode: f[2][0], n: int(nums[0]),
		start: nums[1], acq: nums[2], enter: nums[3], fence: nums[4], plan: nums[5]}, nil
}

// leaveHold completes h with an L line.
func leaveHold(h *hold, l line) error {
	nums, err := ints(l.fields[1], l.fields[2], l.fields[4])
	if err != nil {
		return fmt.Errorf("bad L line %v", l.fields)
	}
	h.leave, h.lost, h.why, h.lostAt, h.nested = nums[0], nums[1] == 1, l.fields[3], nums[2], l.fields[5]
	return nil
}

func ints(s ...string) ([]int64, error) {
	out := make([]int64, len(s))
	for i, v := range s {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

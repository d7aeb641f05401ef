package election

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// Leader is one state of an election, as Leader and Observe report it:
// who leads, with which value, in which term, since when. Its zero Term
// means that nobody leads: a vacancy (see Vacant), which only Observe
// reports (Leader returns ErrNoLeader instead).
type Leader struct {
	// Value is the leader's value: its Campaign's, or its latest
	// Proclaim's. Empty in a vacancy.
	Value string
	// Term is the leadership's fencing token: it strictly increases with
	// every new leadership of the election's name (across handles,
	// Clients and processes, and across Redis restarts that keep every
	// write: appendfsync always), from a counter that Redis keeps without
	// a TTL, as for relock.WithFencing. Hand it to whatever the leader
	// acts on, and have that reject a term lower than one it has seen.
	// Redis that loses its latest writes issues terms again (see the
	// package doc). 0 in a vacancy.
	Term int64
	// Rev counts the Proclaims that changed Value in this term: 0 for the
	// Campaign's value, then 1, 2... In a vacancy, 0.
	Rev int64
	// Since is when the leadership began (when the candidate was made
	// leader), by the Redis server's clock; in a vacancy, when the
	// vacancy was found (by a resignation, by the script that elected
	// nobody or the next leader, or by the observer when the leader's
	// lease ran out unannounced).
	Since time.Time
	// Fingerprint names the leader's handle (its Fingerprint method's
	// value), never its owner token. Empty in a vacancy.
	Fingerprint string
}

// Vacant reports whether l is a vacancy: nobody leads.
func (l Leader) Vacant() bool { return l.Term == 0 }

// same reports whether l and m are one state of the election: both
// vacancies, or one leadership with one value.
func (l Leader) same(m Leader) bool {
	if l.Vacant() || m.Vacant() {
		return l.Vacant() == m.Vacant()
	}
	return l.Term == m.Term && l.Rev == m.Rev && l.Fingerprint == m.Fingerprint && l.Value == m.Value
}

// state is what election_observe.lua read: the leadership now (Vacant
// when none) with its remaining lease, and the log's changes after the
// point asked for.
type state struct {
	now     time.Time
	last    string // the log's last seq, "" when it is empty
	pttl    time.Duration
	leader  Leader
	entries []entry
}

// entry is one change of the log.
type entry struct {
	seq    string
	leader Leader
}

// read reads the election's state and, unless after is "", the changes
// logged after seq after (one script call that changes nothing).
func (e *Election) read(ctx context.Context, after string) (state, error) {
	k := e.h.Keys
	res, err := e.h.RunShared(ctx, scripts.ElectionObserve, []string{k.Lock, k.Sub("log")}, after).Slice()
	if err != nil {
		return state{}, err
	}
	return parseState(res)
}

func parseState(res []any) (state, error) {
	bad := fmt.Errorf("unexpected reply %v", res)
	if len(res) != 5 {
		return state{}, bad
	}
	us, ok1 := res[0].(string)
	last, ok2 := res[1].(string)
	pttl, ok3 := res[2].(int64)
	ld, ok4 := res[3].([]any)
	ents, ok5 := res[4].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return state{}, bad
	}
	now, err := strconv.ParseInt(us, 10, 64)
	if err != nil {
		return state{}, bad
	}
	st := state{now: time.UnixMicro(now), last: last, pttl: time.Duration(pttl) * time.Millisecond}
	if len(ld) == 5 {
		f := make([]string, 5)
		for i, v := range ld {
			if f[i], ok1 = v.(string); !ok1 {
				return state{}, bad
			}
		}
		if st.leader, err = leaderOf(f[0], f[1], f[2], f[3], f[4]); err != nil {
			return state{}, err
		}
	} else {
		st.leader = Leader{Since: st.now}
	}
	for _, v := range ents {
		s, ok := v.(string)
		if !ok {
			return state{}, bad
		}
		en, err := parseEntry(s)
		if err != nil {
			return state{}, err
		}
		st.entries = append(st.entries, en)
	}
	return st, nil
}

// parseEntry parses a log entry, "<seq>|<kind>|<term>|<rev>|<since
// us>|<fp>|<value>" (see election_common.lua).
func parseEntry(s string) (entry, error) {
	f := strings.SplitN(s, "|", 7)
	if len(f) != 7 {
		return entry{}, fmt.Errorf("unexpected log entry of %d fields", len(f))
	}
	en := entry{seq: f[0]}
	switch f[1] {
	case "V":
		since, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return entry{}, fmt.Errorf("unexpected log entry: %w", err)
		}
		en.leader = Leader{Since: time.UnixMicro(since)}
	case "L", "P":
		l, err := leaderOf(f[2], f[3], f[4], f[5], f[6])
		if err != nil {
			return entry{}, err
		}
		en.leader = l
	default:
		return entry{}, fmt.Errorf("unexpected log entry kind %q", f[1])
	}
	return en, nil
}

// leaderOf builds a leadership from its fields as Redis keeps them.
func leaderOf(term, rev, since, fp, value string) (Leader, error) {
	t, err1 := strconv.ParseInt(term, 10, 64)
	r, err2 := strconv.ParseInt(rev, 10, 64)
	s, err3 := strconv.ParseInt(since, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || t <= 0 {
		return Leader{}, fmt.Errorf("unexpected leadership fields (term %q, rev %q, since %q)", term, rev, since)
	}
	return Leader{Value: value, Term: t, Rev: r, Since: time.UnixMicro(s), Fingerprint: fp}, nil
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relock-go/relock/internal/inspect"
)

// jsonLock is the JSON form of a lock (one object per line). Optional
// fields are those of one lock type: queue (mutex, reentrant, fair,
// semaphore, election), mode and waiting_writers (rwlock), permits and
// used (semaphore), count (latch), fence (locks used with fencing; an
// election's term, while it has a leader). An election's owner is its
// leader, and the metadata of its owner and queue are their values.
type jsonLock struct {
	Kind           string        `json:"kind"`
	Name           string        `json:"name"`
	Held           bool          `json:"held"`
	TTLMs          int64         `json:"ttl_ms"` // 0 when not held, -1 without expiry
	Mode           string        `json:"mode,omitempty"`
	Owners         []jsonOwner   `json:"owners"`
	Queue          *[]jsonWaiter `json:"queue,omitempty"`
	WaitingWriters *[]jsonWaiter `json:"waiting_writers,omitempty"`
	Permits        *int          `json:"permits,omitempty"`
	Used           *int          `json:"used,omitempty"`
	Count          *int          `json:"count,omitempty"`
	Fence          *int64        `json:"fence,omitempty"`
}

type jsonOwner struct {
	Owner     string `json:"owner"` // fingerprint
	Count     int    `json:"count"`
	Read      *int   `json:"read,omitempty"`
	Write     *int   `json:"write,omitempty"`
	ExpiresMs *int64 `json:"expires_ms,omitempty"`
	Metadata  string `json:"metadata,omitempty"` // relock.WithMetadata's
}

type jsonWaiter struct {
	Owner    string `json:"owner"`
	AliveMs  int64  `json:"alive_ms"`
	Want     int    `json:"want,omitempty"` // permits a semaphore waiter asks for
	Metadata string `json:"metadata,omitempty"`
}

func toJSON(l inspect.Lock) jsonLock {
	j := jsonLock{Kind: l.Kind, Name: l.Name, Held: l.Held, TTLMs: l.TTL.Milliseconds(),
		Mode: l.Mode, Owners: make([]jsonOwner, 0, len(l.Owners))}
	if l.TTL < 0 {
		j.TTLMs = -1
	}
	for _, o := range l.Owners {
		jo := jsonOwner{Owner: o.Fingerprint, Count: o.Count, Metadata: o.Metadata}
		switch l.Kind {
		case "rwlock":
			r, w, e := o.Read, o.Write, o.Expires.Milliseconds()
			jo.Read, jo.Write, jo.ExpiresMs = &r, &w, &e
		case "semaphore":
			e := o.Expires.Milliseconds()
			jo.ExpiresMs = &e
		}
		j.Owners = append(j.Owners, jo)
	}
	switch l.Kind {
	case "rwlock":
		w := waitersJSON(l.WaitingWriters)
		j.WaitingWriters = &w
	case "latch":
		n := l.Count
		j.Count = &n
	default:
		q := waitersJSON(l.Queue)
		j.Queue = &q
	}
	if l.Kind == "semaphore" {
		p, u := l.Permits, l.Used
		j.Permits, j.Used = &p, &u
	}
	if l.HasFence {
		f := l.Fence
		j.Fence = &f
	}
	return j
}

func waitersJSON(ws []inspect.Waiter) []jsonWaiter {
	out := make([]jsonWaiter, 0, len(ws))
	for _, w := range ws {
		out = append(out, jsonWaiter{Owner: w.Fingerprint, AliveMs: w.Alive.Milliseconds(), Want: w.Count, Metadata: w.Metadata})
	}
	return out
}

// writeJSON prints each lock as one JSON object on its own line.
func writeJSON(w io.Writer, locks []inspect.Lock) error {
	enc := json.NewEncoder(w)
	for _, l := range locks {
		if err := enc.Encode(toJSON(l)); err != nil {
			return err
		}
	}
	return nil
}

// writeDetails prints inspect's view: per lock a header line and tables
// of owners and waiters.
func writeDetails(w io.Writer, locks []inspect.Lock) error {
	for i, l := range locks {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := fmt.Sprintf("%s %q: %s", l.Kind, l.Name, state(l))
		if l.Held {
			head += ", ttl " + ttlString(l.TTL)
		}
		switch {
		case l.HasFence && l.Kind == "election":
			head += ", term " + strconv.FormatInt(l.Fence, 10)
		case l.HasFence:
			head += ", fence " + strconv.FormatInt(l.Fence, 10)
		}
		if l.Kind == "semaphore" {
			head += fmt.Sprintf(", %d of %d permits used", l.Used, l.Permits)
		}
		fmt.Fprintln(w, head)
		if len(l.Owners) > 0 {
			t := table(w)
			mh, mv := metaColumn(l.Owners, func(o inspect.Owner) string { return o.Metadata })
			switch l.Kind {
			case "rwlock":
				fmt.Fprintln(t, "  OWNER\tREAD\tWRITE\tEXPIRES"+mh)
				for _, o := range l.Owners {
					fmt.Fprintf(t, "  %s\t%d\t%d\t%s%s\n", o.Fingerprint, o.Read, o.Write, ttlString(o.Expires), mv(o.Metadata))
				}
			case "semaphore":
				fmt.Fprintln(t, "  OWNER\tPERMITS\tEXPIRES"+mh)
				for _, o := range l.Owners {
					fmt.Fprintf(t, "  %s\t%d\t%s%s\n", o.Fingerprint, o.Count, ttlString(o.Expires), mv(o.Metadata))
				}
			case "election":
				fmt.Fprintln(t, "  LEADER\tVALUE")
				for _, o := range l.Owners {
					fmt.Fprintf(t, "  %s\t%s\n", o.Fingerprint, shortValue(o.Metadata))
				}
			default:
				fmt.Fprintln(t, "  OWNER\tHOLDS"+mh)
				for _, o := range l.Owners {
					fmt.Fprintf(t, "  %s\t%d%s\n", o.Fingerprint, o.Count, mv(o.Metadata))
				}
			}
			if err := t.Flush(); err != nil {
				return err
			}
		}
		if len(l.Queue) > 0 {
			t := table(w)
			mh, mv := metaColumn(l.Queue, func(q inspect.Waiter) string { return q.Metadata })
			switch l.Kind {
			case "semaphore":
				fmt.Fprintln(t, "  QUEUE\tWAITER\tWANTS\tALIVE"+mh)
				for i, q := range l.Queue {
					fmt.Fprintf(t, "  %d\t%s\t%d\t%s%s\n", i+1, q.Fingerprint, q.Count, aliveString(q.Alive), mv(q.Metadata))
				}
			case "election":
				fmt.Fprintln(t, "  QUEUE\tCANDIDATE\tALIVE\tVALUE")
				for i, q := range l.Queue {
					fmt.Fprintf(t, "  %d\t%s\t%s\t%s\n", i+1, q.Fingerprint, aliveString(q.Alive), shortValue(q.Metadata))
				}
			default:
				fmt.Fprintln(t, "  QUEUE\tWAITER\tALIVE"+mh)
				for i, q := range l.Queue {
					fmt.Fprintf(t, "  %d\t%s\t%s%s\n", i+1, q.Fingerprint, aliveString(q.Alive), mv(q.Metadata))
				}
			}
			if err := t.Flush(); err != nil {
				return err
			}
		}
		if len(l.WaitingWriters) > 0 {
			t := table(w)
			fmt.Fprintln(t, "  WAITING WRITER\tALIVE")
			for _, q := range l.WaitingWriters {
				fmt.Fprintf(t, "  %s\t%s\n", q.Fingerprint, aliveString(q.Alive))
			}
			if err := t.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeList prints list's table, one lock per row.
func writeList(w io.Writer, locks []inspect.Lock) error {
	t := table(w)
	fmt.Fprintln(t, "KIND\tNAME\tSTATE\tOWNERS\tTTL\tWAITERS")
	for _, l := range locks {
		ttl, waiters := "-", "-"
		if l.Held {
			ttl = ttlString(l.TTL)
		}
		switch l.Kind {
		case "rwlock":
			waiters = strconv.Itoa(len(l.WaitingWriters))
		case "latch":
		default:
			waiters = strconv.Itoa(len(l.Queue))
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Kind, displayName(l.Name), state(l), ownersCell(l), ttl, waiters)
	}
	return t.Flush()
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// state is "held" or "free"; an rwlock's is its mode, "read" or "write";
// a latch's is its count, "count N", or "open" at zero (nobody holds a
// latch: the count is what waiters wait on).
func state(l inspect.Lock) string {
	switch {
	case l.Kind == "latch" && l.Count > 0:
		return fmt.Sprintf("count %d", l.Count)
	case l.Kind == "latch":
		return "open"
	case !l.Held:
		return "free"
	case l.Mode != "":
		return l.Mode
	}
	return "held"
}

// ownersCell shows the first owner and how many more there are.
func ownersCell(l inspect.Lock) string {
	if len(l.Owners) == 0 {
		return "-"
	}
	o := l.Owners[0]
	s := o.Fingerprint
	switch {
	case l.Kind == "rwlock" && o.Write > 0 && o.Read > 0:
		s += fmt.Sprintf(" w%d+r%d", o.Write, o.Read)
	case l.Kind == "rwlock" && o.Write > 0:
		s += fmt.Sprintf(" w%d", o.Write)
	case l.Kind == "rwlock":
		s += fmt.Sprintf(" r%d", o.Read)
	case o.Count > 1:
		s += fmt.Sprintf(" x%d", o.Count)
	}
	switch {
	case l.Kind == "election" && o.Metadata != "":
		s += " (" + shortValue(o.Metadata) + ")"
	case o.Metadata != "":
		s += " (" + displayName(o.Metadata) + ")"
	}
	if n := len(l.Owners) - 1; n > 0 {
		s += fmt.Sprintf(" +%d", n)
	}
	return s
}

// displayName quotes a name that would break a table row.
func displayName(name string) string {
	if strings.ContainsAny(name, " \t") || strconv.Quote(name) != `"`+name+`"` {
		return strconv.Quote(name)
	}
	return name
}

// shortValue shows an election's value (up to 64 KiB) in a table: its
// first 40 characters, quoted as displayName does, "-" when empty. -json
// shows it whole.
func shortValue(v string) string {
	if v == "" {
		return "-"
	}
	if r := []rune(v); len(r) > 40 {
		v = string(r[:37]) + "..."
	}
	return displayName(v)
}

// ttlString shows a remaining lease: "850ms", "29.8s", "5m3s".
func ttlString(d time.Duration) string {
	switch {
	case d < 0:
		return "no expiry"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// aliveString shows a waiter's remaining liveness; at or below 0 the
// waiter is dead.
func aliveString(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	return ttlString(d)
}

// metaColumn returns the header and the cells of a METADATA column of
// rows, both empty unless some row's metadata (meta) is not: the column is
// shown only when some owner or waiter gave metadata.
func metaColumn[T any](rows []T, meta func(T) string) (string, func(string) string) {
	for _, r := range rows {
		if meta(r) != "" {
			return "\tMETADATA", func(m string) string { return "\t" + displayName(m) }
		}
	}
	return "", func(string) string { return "" }
}

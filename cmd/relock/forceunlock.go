package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/inspect"
)

// cmdForceUnlock deletes every held lock called args[0], after asking
// (unless -yes) about the holders it read, and only while they hold it,
// no more and no fewer (see inspect.ForceUnlock); it wakes the lock's
// waiters as the lock packages' ForceUnlock does. When the holders changed
// since they were read, it says so and asks again about the new ones;
// with -yes it deletes nothing of that lock and fails. It also fails when
// it deleted nothing.
func cmdForceUnlock(e *env, args []string) error {
	name := args[0]
	locks, err := e.inspect(name)
	if err != nil {
		return err
	}
	c := relock.New(e.rdb)
	defer c.Close()
	deleted, declined := 0, 0
	var changed []string
	for _, l := range locks {
		if !l.Held || l.Kind == "latch" {
			continue // only waiters, or a latch (nobody holds it): nothing to delete
		}
		res, err := e.forceUnlock(c, l)
		if err != nil {
			return err
		}
		switch res {
		case forceDeleted:
			deleted++
		case forceDeclined:
			declined++
		case forceChanged:
			changed = append(changed, fmt.Sprintf("%s %q", l.Kind, name))
		}
	}
	switch {
	case len(changed) > 0:
		return fmt.Errorf("%s not deleted: held by other owners than those read (with -yes only those are deleted; run force-unlock again to delete the new holders)",
			strings.Join(changed, ", "))
	case deleted > 0:
		return nil
	case declined > 0:
		return errors.New("nothing deleted")
	}
	return fmt.Errorf("nothing to force-unlock: no lock named %q is held", name)
}

// What forceUnlock did with one lock.
const (
	forceFree     = iota // nobody held it any more: nothing deleted
	forceDeleted         // deleted
	forceDeclined        // the operator said no
	forceChanged         // -yes, and other owners held it: nothing deleted
)

// beforeForceUnlock, if set (by tests), is called between asking about a
// lock's holders (or reading them, with -yes) and force-unlocking it.
var beforeForceUnlock func(l inspect.Lock)

// forceUnlock deletes lock l once the operator confirmed its holders (or
// -yes), if they still hold it, no more and no fewer. When others hold it
// instead, it shows them and asks again (with -yes it refuses). The
// deletion is one request, which Redis applies once.
func (e *env) forceUnlock(c *relock.Client, l inspect.Lock) (int, error) {
	for {
		owners := fingerprints(l)
		if !e.opts.yes && !e.confirm(fmt.Sprintf("force-unlock %s %q held by %s? [y/N] ", l.Kind, l.Name, strings.Join(owners, ", "))) {
			return forceDeclined, nil
		}
		if beforeForceUnlock != nil {
			beforeForceUnlock(l)
		}
		ctx, cancel := e.callCtx()
		out, err := inspect.ForceUnlock(ctx, c, l)
		cancel()
		if err != nil && !core.IsRedisError(err) {
			return 0, fmt.Errorf("%w (whether it was deleted is unknown: inspect it)", err)
		}
		if err != nil {
			return 0, err
		}
		switch out {
		case force.Deleted:
			return forceDeleted, e.reportDeleted(l, owners, true)
		case force.Free:
			return forceFree, e.reportDeleted(l, owners, false)
		}
		now, err := e.reread(l)
		if err != nil {
			return 0, err
		}
		if now == nil {
			return forceFree, e.reportDeleted(l, owners, false)
		}
		if e.opts.yes {
			return forceChanged, e.reportChanged(l, owners, fingerprints(*now))
		}
		fmt.Fprintf(e.errw, "%s %q is now held by %s, not %s: nothing deleted\n",
			l.Kind, l.Name, strings.Join(fingerprints(*now), ", "), strings.Join(owners, ", "))
		l = *now
	}
}

// reread reads lock l again: nil when nobody holds it now.
func (e *env) reread(l inspect.Lock) (*inspect.Lock, error) {
	ctx, cancel := e.callCtx()
	defer cancel()
	locks, err := inspect.Read(ctx, e.rdb, []inspect.Ref{{Kind: l.Kind, Name: l.Name}})
	if err != nil || len(locks) == 0 || !locks[0].Held {
		return nil, err
	}
	return &locks[0], nil
}

// confirm asks question on stderr and reads the answer from stdin: only
// "y" or "yes" is yes; no answer (end of input) is no.
func (e *env) confirm(question string) bool {
	fmt.Fprint(e.errw, question)
	line, _ := e.in.ReadString('\n')
	if e.echo {
		// Input that is not typed is not echoed: show it, and end the line.
		fmt.Fprintln(e.errw, strings.TrimSpace(line))
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// reportDeleted reports the force-unlock of lock l, held by owners when
// asked about: deleted, or released meanwhile (nothing deleted).
func (e *env) reportDeleted(l inspect.Lock, owners []string, ok bool) error {
	if e.opts.json {
		return e.reportJSON(forceReport{Kind: l.Kind, Name: l.Name, Deleted: ok, Owners: owners})
	}
	var err error
	if ok {
		_, err = fmt.Fprintf(e.out, "deleted %s %q held by %s\n", l.Kind, l.Name, strings.Join(owners, ", "))
	} else {
		_, err = fmt.Fprintf(e.out, "%s %q was released meanwhile: nothing deleted\n", l.Kind, l.Name)
	}
	return err
}

// reportChanged reports that lock l, read as held by owners, is held by
// now instead, and was not deleted (-yes).
func (e *env) reportChanged(l inspect.Lock, owners, now []string) error {
	if e.opts.json {
		return e.reportJSON(forceReport{Kind: l.Kind, Name: l.Name, Owners: owners, Changed: true, Now: now})
	}
	_, err := fmt.Fprintf(e.out, "%s %q is now held by %s, not %s: nothing deleted\n",
		l.Kind, l.Name, strings.Join(now, ", "), strings.Join(owners, ", "))
	return err
}

// forceReport is the JSON form of what force-unlock did with one lock:
// owners are the holders asked about (or read, with -yes); changed and
// now_owners say that other owners held it instead, and were kept.
type forceReport struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Deleted bool     `json:"deleted"`
	Owners  []string `json:"owners"`
	Changed bool     `json:"changed,omitempty"`
	Now     []string `json:"now_owners,omitempty"`
}

func (e *env) reportJSON(r forceReport) error { return json.NewEncoder(e.out).Encode(r) }

func fingerprints(l inspect.Lock) []string {
	out := make([]string, len(l.Owners))
	for i, o := range l.Owners {
		out[i] = o.Fingerprint
	}
	return out
}

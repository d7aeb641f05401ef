package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// cmdForceUnlock deletes every held lock called args[0], after asking
// (unless -yes), through the lock packages' ForceUnlock, which also wakes
// the lock's waiters. It fails when it deleted nothing.
func cmdForceUnlock(e *env, args []string) error {
	name := args[0]
	locks, err := e.inspect(name)
	if err != nil {
		return err
	}
	c := relock.New(e.rdb)
	defer c.Close()
	deleted, declined := 0, 0
	for _, l := range locks {
		if !l.Held || l.Kind == "latch" {
			continue // only waiters, or a latch (nobody holds it): nothing to delete
		}
		owners := fingerprints(l)
		if !e.opts.yes && !e.confirm(fmt.Sprintf("force-unlock %s %q held by %s? [y/N] ", l.Kind, name, strings.Join(owners, ", "))) {
			declined++
			continue
		}
		ctx, cancel := e.callCtx()
		ok, err := forceUnlock(ctx, c, l, name)
		cancel()
		if err != nil {
			return err
		}
		if err := e.reportDeleted(l, owners, ok); err != nil {
			return err
		}
		if ok {
			deleted++
		}
	}
	switch {
	case deleted > 0:
		return nil
	case declined > 0:
		return errors.New("nothing deleted")
	}
	return fmt.Errorf("nothing to force-unlock: no lock named %q is held", name)
}

// forceUnlock calls the ForceUnlock of l's lock type (a semaphore's
// ForceRelease, with its capacity).
func forceUnlock(ctx context.Context, c *relock.Client, l inspect.Lock, name string) (bool, error) {
	kind := l.Kind
	switch kind {
	case "semaphore":
		return semaphore.New(c, name, l.Permits).ForceRelease(ctx)
	case "mutex":
		return mutex.New(c, name).ForceUnlock(ctx)
	case "reentrant":
		return reentrant.New(c, name).ForceUnlock(ctx)
	case "fair":
		return fair.New(c, name).ForceUnlock(ctx)
	case "rwlock":
		return rwlock.New(c, name).ForceUnlock(ctx)
	}
	return false, fmt.Errorf("unknown lock type %q", kind)
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

func (e *env) reportDeleted(l inspect.Lock, owners []string, ok bool) error {
	if e.opts.json {
		return json.NewEncoder(e.out).Encode(struct {
			Kind    string   `json:"kind"`
			Name    string   `json:"name"`
			Deleted bool     `json:"deleted"`
			Owners  []string `json:"owners"`
		}{l.Kind, l.Name, ok, owners})
	}
	var err error
	if ok {
		_, err = fmt.Fprintf(e.out, "deleted %s %q held by %s\n", l.Kind, l.Name, strings.Join(owners, ", "))
	} else {
		_, err = fmt.Fprintf(e.out, "%s %q was released meanwhile: nothing deleted\n", l.Kind, l.Name)
	}
	return err
}

func fingerprints(l inspect.Lock) []string {
	out := make([]string, len(l.Owners))
	for i, o := range l.Owners {
		out[i] = o.Fingerprint
	}
	return out
}

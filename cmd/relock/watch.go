package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/core"
)

func watchFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.count, "count", 0, "stop after `N` refreshes (0: until interrupted)")
}

// cmdWatch prints inspect's view of args[0] at once and then every
// -interval, until interrupted (its ctx ends) or after -count refreshes.
// A refresh that finds no lock says so and watch goes on; one that fails
// (Redis unreachable) prints why on stderr and watch goes on too.
func cmdWatch(e *env, args []string) error {
	name := args[0]
	if err := core.CheckName(name); err != nil {
		return usageError{err}
	}
	t := time.NewTicker(e.opts.interval)
	defer t.Stop()
	for i := 0; e.opts.count <= 0 || i < e.opts.count; i++ {
		if i > 0 {
			select {
			case <-e.ctx.Done():
				return nil
			case <-t.C:
			}
		}
		if err := e.refresh(name, i > 0); err != nil || e.ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// refresh prints one view of name; it returns only output errors.
func (e *env) refresh(name string, again bool) error {
	locks, err := e.inspect(name)
	if e.ctx.Err() != nil {
		return nil // interrupted: not worth a message
	}
	if e.opts.json {
		var noLock errNoLock
		if err != nil && !errors.As(err, &noLock) {
			fmt.Fprintf(e.errw, "relock: %v\n", err)
		}
		return writeJSON(e.out, locks)
	}
	if again {
		fmt.Fprintln(e.out)
	}
	fmt.Fprintf(e.out, "Every %v: relock watch %q  %s\n\n", e.opts.interval, name, time.Now().Format("15:04:05"))
	var noLock errNoLock
	switch {
	case errors.As(err, &noLock):
		_, err = fmt.Fprintln(e.out, err)
		return err
	case err != nil:
		fmt.Fprintf(e.errw, "relock: %v\n", err)
		return nil
	}
	return writeDetails(e.out, locks)
}

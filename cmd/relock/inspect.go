package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/inspect"
)

// cmdInspect prints every lock called args[0]; it fails when there is none.
func cmdInspect(e *env, args []string) error {
	locks, err := e.inspect(args[0])
	if err != nil {
		return err
	}
	return e.print(locks, writeDetails)
}

// inspect reads every lock called name, bounded by -timeout. It returns
// an error when there is none.
func (e *env) inspect(name string) ([]inspect.Lock, error) {
	if err := core.CheckName(name); err != nil {
		return nil, usageError{err}
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	locks, err := inspect.Inspect(ctx, e.rdb, name)
	if errors.Is(err, inspect.ErrNoLock) {
		return nil, errNoLock{name}
	}
	return locks, err
}

// print prints locks as JSON lines with -json, else with text.
func (e *env) print(locks []inspect.Lock, text func(w io.Writer, locks []inspect.Lock) error) error {
	if e.opts.json {
		return writeJSON(e.out, locks)
	}
	return text(e.out, locks)
}

// errNoLock is inspect's error when no lock has the name.
type errNoLock struct{ name string }

func (e errNoLock) Error() string { return fmt.Sprintf("no lock named %q", e.name) }

package main

import (
	"fmt"

	"github.com/relock-go/relock/internal/inspect"
)

// cmdList prints the locks whose name matches the pattern (default "*").
// A walk of a large keyspace takes many SCAN calls, so only each call,
// not the whole walk, is bounded by -timeout.
func cmdList(e *env, args []string) error {
	pattern := "*"
	if len(args) > 0 {
		pattern = args[0]
	}
	locks, err := inspect.List(e.ctx, e.rdb, pattern)
	if err != nil {
		return fmt.Errorf("list %q: %w", pattern, err)
	}
	if len(locks) == 0 && !e.opts.json {
		_, err := fmt.Fprintf(e.out, "no lock matches %q\n", pattern)
		return err
	}
	return e.print(locks, writeList)
}

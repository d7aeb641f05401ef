package redistest

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// CheckGoroutines records how many goroutines of relock (and of go-redis)
// run now and, at the end of t, fails t if more still run after a grace
// period: they leaked. Goroutines of the test itself and of miniredis are
// not counted. Those of other tests would be: t must run alone
// (Exclusive).
func CheckGoroutines(t testing.TB) {
	t.Helper()
	CheckGoroutinesOf(t, "relock goroutines", Library)
}

// CheckGoroutinesOf is CheckGoroutines for the goroutines whose stack
// match accepts (what names them in the failure): it records how many run
// now and, at the end of t, fails t if more still run after up to 3 s.
// t must run alone (Exclusive).
func CheckGoroutinesOf(t testing.TB, what string, match func(stack string) bool) {
	t.Helper()
	Exclusive(t, "it counts the goroutines of the whole process")
	if onCluster && !testing.Short() {
		clusterOnce.Do(formCluster) // the cluster's start (MainCluster) is over (or made here, if this came first)
	}
	before, _ := count(match)
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n, stacks := count(match)
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %d before, %d after:\n%s", what, before, n, stacks)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// Subscribed makes a Client open its subscription connection, which
// stays with the Client, and waits for its goroutine: a test that counts
// goroutines (CheckGoroutines) calls it before, so that goroutine is
// counted before. wait must be a wait of that Client that cannot be
// granted, and must end with its ctx (an error matching
// context.DeadlineExceeded). Subscribed calls it with a timeout of 20 ms,
// then twice as long each time, until a subscription goroutine runs that
// did not run before: a wait that ends before the connection is dialled may
// leave it undialled, and one that ends while it is dialled leaves its
// goroutine to start after. The goroutines are told apart by their ids,
// which Go never reuses: a count would miss the Client's when an earlier
// test's Client's ends meanwhile.
func Subscribed(t testing.TB, wait func(ctx context.Context) error) {
	t.Helper()
	hub := func(stack string) bool { return strings.Contains(stack, "internal/notify.(*Hub).receive(") }
	before := ids(hub)
	for d := 20 * time.Millisecond; ; d *= 2 {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := wait(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait that cannot be granted returned %v, not its ctx's end", err)
		}
		for id := range ids(hub) {
			if !before[id] {
				return
			}
		}
		if d > 5*time.Second {
			t.Fatalf("no subscription goroutine starts after waits of up to %v", d)
		}
	}
}

// ids returns the ids of the goroutines whose stack match accepts.
func ids(match func(stack string) bool) map[string]bool {
	out := map[string]bool{}
	for _, g := range stacks(match) {
		// "goroutine 42 [select]:"
		if f := strings.Fields(g); len(f) > 1 && f[0] == "goroutine" {
			out[f[1]] = true
		}
	}
	return out
}

// Library reports whether a goroutine's stack runs relock's internal
// packages or go-redis (not this package's helpers). go-redis's
// maintenance-notification workers are not counted: newer go-redis
// (v9.23.0) starts one for each node client of a ClusterClient, when the
// ClusterClient first reaches that node, and it ends with the
// ClusterClient's Close, which is the test's, not relock's.
func Library(stack string) bool {
	lib := strings.Contains(stack, "relock-go/relock/internal/") || strings.Contains(stack, "redis/go-redis/")
	return lib && !strings.Contains(stack, "internal/redistest") &&
		!strings.Contains(stack, "redis/go-redis/v9/maintnotifications.")
}

// count returns how many goroutines have a stack that match accepts, and
// those stacks.
func count(match func(stack string) bool) (int, string) {
	keep := stacks(match)
	return len(keep), strings.Join(keep, "\n\n")
}

// stacks returns the stacks of the goroutines that match accepts, each
// opening with its "goroutine <id> [<state>]:" line.
func stacks(match func(stack string) bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var keep []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if match(g) {
			keep = append(keep, g)
		}
	}
	return keep
}

// Goroutines returns how many goroutines run relock's or go-redis's code
// (in the whole process: a test that counts them runs alone, Exclusive).
func Goroutines() int {
	n, _ := count(Library)
	return n
}

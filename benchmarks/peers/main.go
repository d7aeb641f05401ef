// Command peers runs relockbench's scenarios for relock and for the Go
// lock libraries people would pick instead, in one run against one server,
// and prints them side by side (with -full, the ratios relock/peer of
// every figure):
//
//   - github.com/go-redsync/redsync/v4 with its defaults,
//   - github.com/bsm/redislock with a linear retry of 1ms and of 10ms,
//   - rueidislock from github.com/redis/rueidis with its defaults;
//   - with -redlock URL,URL,...: redsync over 3 and 5 independent masters
//     (its Redlock) beside relock's redlock package, uncontended and
//     hand-off only;
//   - with -cluster URL,URL,...: relock's kinds on a Redis Cluster as
//     well (no peer: redsync, redislock and rueidislock take a single
//     client here), uncontended and hand-off only.
//
// Run it from the repository root:
//
//	go -C benchmarks/peers run . -redis redis://127.0.0.1:6379
//
// It is a module of its own so that relock's go.mod does not carry the
// peers' dependencies. Without -redis it runs on an embedded miniredis,
// where rueidislock cannot run (it needs CLIENT TRACKING) and figures are
// not Redis figures. Every peer run is bounded: a lock that hangs is
// reported as stalled, not waited for.
package main

import (
	"os"
	"time"

	"github.com/relock-go/relock/benchmarks/bench"
)

func main() {
	bench.RegisterMultiKind(redsyncMultiKind)
	kinds := append(bench.RelockKinds(), redsyncKind(), redislockKind(time.Millisecond), redislockKind(10*time.Millisecond), rueidislockKind())
	os.Exit(bench.Main("relockbench-peers", os.Args[1:], kinds, os.Stdout, os.Stderr))
}

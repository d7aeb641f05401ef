// Command relockbench measures relock's lock types and prints, within 80
// columns, each type's figures as ratios over plain Redis commands doing
// the same job: the uncontended cycle, many locks at once, the hand-off
// to a waiting process, a busy lock's throughput, and (on a real server)
// what a cycle costs the Redis server.
//
//	go run ./benchmarks/cmd/relockbench                          # embedded miniredis, a short tour
//	go run ./benchmarks/cmd/relockbench -redis redis://127.0.0.1:6379
//
// Figures from the embedded miniredis are not Redis figures. Against a
// real server every scenario runs (Redis memory per lock and per waiter,
// the server cost of each cycle, the hand-off under sustained contention,
// read-heavy load, many readers and many queued waiters, the watchdog at
// scale, ...): -full adds every measurement's figures to the summary,
// -targets the project's performance targets, -json gives every figure.
// The same scenarios for other Go lock libraries, in the same run, are in
// the nested module benchmarks/peers.
package main

import (
	"os"

	"github.com/relock-go/relock/benchmarks/bench"
)

func main() {
	os.Exit(bench.Main("relockbench", os.Args[1:], bench.RelockKinds(), os.Stdout, os.Stderr))
}

// Command relockbench measures relock's lock types: Redis memory per held
// lock, queued waiter and lock cycle; uncontended cycle beside the raw
// SET NX + DEL floor; hand-off latency, with one waiter and under
// sustained contention; contention (throughput, waits, fairness, mutual
// exclusion); read-heavy load; server time with many readers and many
// queued waiters; many locks at once beside SET NX + DEL; and the watchdog
// at scale. It prints a table that fits 100 columns, every target met or
// MISSED with its figure, or (-json) every figure.
//
//	go run ./benchmarks/cmd/relockbench                          # embedded miniredis
//	go run ./benchmarks/cmd/relockbench -redis redis://127.0.0.1:6379
//
// Figures from the embedded miniredis are not Redis figures. The same
// scenarios for other Go lock libraries, in the same run, are in the
// nested module benchmarks/peers.
package main

import (
	"os"

	"github.com/relock-go/relock/benchmarks/bench"
)

func main() {
	os.Exit(bench.Main("relockbench", os.Args[1:], bench.RelockKinds(), os.Stdout, os.Stderr))
}

// Package fuzz holds relock's native Go fuzz tests (its _test.go files; it
// has no code of its own). They run every lock type on an embedded
// miniredis whose TTLs do not run down, against an in-memory model of the
// lock, and check that no input makes relock panic, return an error other
// than the one its documentation promises, or touch another owner's hold.
//
// `go test` runs the checked-in seed corpora (testdata/fuzz/<FuzzName>/)
// as ordinary tests, as CI does; to search for new inputs run one fuzzer
// at a time, e.g.
//
//	go test ./internal/fuzz -run '^$' -fuzz '^FuzzMutex$' -fuzztime 3m -fuzzminimizetime 100x
//
// (the inputs are slow, some wait 5 ms for a lock that stays held, so
// minimizing each new input for the default minute stalls the search),
// and check in what it finds as seeds: a failing input is written to
// testdata/fuzz/<FuzzName>/ by the fuzzer itself; new interesting ones are
// in the build cache, $(go env GOCACHE)/fuzz/.../<FuzzName>/.
package fuzz

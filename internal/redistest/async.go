package redistest

import (
	"testing"
	"time"
)

// Result is what a call run by Async returned, and when it returned.
type Result struct {
	Err error
	At  time.Time
}

// Async runs f in a goroutine; the channel receives its Result.
func Async(f func() error) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		err := f()
		ch <- Result{Err: err, At: time.Now()}
	}()
	return ch
}

// Await returns the Result of a call run by Async, failing t if it takes
// longer than d; what names the call.
func Await(t testing.TB, ch <-chan Result, d time.Duration, what string) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
		return Result{}
	}
}

// Pending fails t if ch has delivered a Result: the call must still wait.
func Pending(t testing.TB, ch <-chan Result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (err %v) while it should still wait", what, r.Err)
	default:
	}
}

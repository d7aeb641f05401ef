package redistest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// CheckGoroutines records how many goroutines of relock (and of go-redis)
// run now and, at the end of t, fails t if more still run after a grace
// period: they leaked. Goroutines of the test itself and of miniredis are
// not counted.
func CheckGoroutines(t testing.TB) {
	t.Helper()
	before, _ := ours()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n, stacks := ours()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("relock goroutines: %d before, %d after:\n%s", before, n, stacks)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// ours counts the goroutines running relock's or go-redis's code.
func ours() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var keep []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		lib := strings.Contains(g, "relock-go/relock/internal/") || strings.Contains(g, "redis/go-redis/")
		if lib && !strings.Contains(g, "internal/redistest") {
			n++
			keep = append(keep, g)
		}
	}
	return n, strings.Join(keep, "\n\n")
}

// Goroutines returns how many goroutines run relock's or go-redis's code.
func Goroutines() int {
	n, _ := ours()
	return n
}

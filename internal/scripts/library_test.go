package scripts

import (
	"strings"
	"testing"
)

// TestBodiesOnce: the function library holds each script's body once,
// shared by its two twins (see buildLibrary): a copy per twin grew the
// Lua heap that Redis's garbage collector traverses by a third.
func TestBodiesOnce(t *testing.T) {
	_, src := Library()
	for _, s := range all {
		body := strings.ReplaceAll(s.body, publishCall, "publish(")
		if n := strings.Count(src, body); n != 1 {
			t.Errorf("the library holds %s's body %d times, want 1", s.name, n)
		}
	}
}

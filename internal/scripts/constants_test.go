package scripts_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/scripts"
)

// TestStarvationThreshold: the scripts hand a mutex or a reentrant lock
// over after the starvation threshold that the Go side documents.
func TestStarvationThreshold(t *testing.T) {
	_, src := scripts.Library()
	want := "local STARVE_MS = " + strconv.FormatInt(core.StarvationThreshold.Milliseconds(), 10) + "\n"
	if !strings.Contains(src, want) {
		t.Fatalf("handoff.lua does not define %q", strings.TrimSpace(want))
	}
}

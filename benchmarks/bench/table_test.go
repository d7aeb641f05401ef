package bench_test

import (
	"strings"
	"testing"

	"github.com/relock-go/relock/benchmarks/bench"
)

func TestKeyClass(t *testing.T) {
	const prefix = "relockbench.memory.0a1b."
	for _, tc := range []struct{ key, want string }{
		{"relock:mutex:{relockbench.memory.0a1b.17}", "lock"},
		{"relock:fair:{relockbench.memory.0a1b.17}:r:5f2c", "record"},
		{"relock:rwlock:{relockbench.memory.0a1b.3}:owners", "owners"},
		{"relock:fair:{relockbench.memory.0a1b.3}:queue", "queue"},
		{"relockbench.memory.0a1b.250", "lock"},
		{"rueidislock:1:relockbench.memory.0a1b.9", "lock"},
		{"unrelated", "other"},
	} {
		if got := bench.KeyClass(tc.key, prefix); got != tc.want {
			t.Errorf("keyClass(%q): got %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := bench.Wrap("aaa bbb ccc ddd", 2, 9)
	want := "  aaa bbb\n  ccc ddd\n"
	if got != want {
		t.Errorf("wrap: got %q, want %q", got, want)
	}
	long := strings.Repeat("x", 20)
	if got, want := bench.Wrap(long+" y", 0, 10), long+"\ny\n"; got != want {
		t.Errorf("wrap of a long word: got %q, want %q", got, want)
	}
}

package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ScriptCalls returns how many EVAL, EVALSHA and FCALL commands a real
// server has run (INFO commandstats), to check that a stall made go-redis
// resend.
func ScriptCalls(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	return CommandCalls(t, c, ScriptCommands...)
}

// ScriptCommands are the commands that run relock's scripts: as scripts,
// and as functions (see internal/scripts.Runner).
var ScriptCommands = []string{"evalsha", "eval", "fcall"}

// IsScript reports whether the command named name (any case) runs a
// script or a function.
func IsScript(name string) bool {
	switch strings.ToLower(name) {
	case "evalsha", "eval", "fcall":
		return true
	}
	return false
}

// CommandCalls returns how many of the named commands (lower case) a real
// server has run (INFO commandstats). Other tests' commands count too: on
// a server that the binary's tests share, t must run alone (Exclusive;
// RunOwn gives a test a server of its own).
func CommandCalls(t testing.TB, c redis.UniversalClient, names ...string) int64 {
	t.Helper()
	if sharedClient(c) {
		Exclusive(t, "INFO commandstats counts every test's commands")
	}
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || !contains(names, name) {
			continue
		}
		for _, f := range strings.Split(strings.SplitN(line, ":", 2)[1], ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// Stall makes a real server sleep for d (DEBUG SLEEP, which the test
// server enables), starting now; commands sent meanwhile wait in their
// sockets and run when it wakes, even those whose client has given up on
// them, as after a read timeout. Stall returns once the sleep has begun.
// Every other client's commands wait too: on a server that the binary's
// tests share, t must run alone (Exclusive; RunOwn gives a test a server
// of its own).
func Stall(t testing.TB, admin redis.UniversalClient, d time.Duration) {
	t.Helper()
	if sharedClient(admin) {
		Exclusive(t, "DEBUG SLEEP stalls every client of the server")
	}
	done := make(chan error, 1)
	go func() {
		done <- admin.Do(context.Background(), "DEBUG", "SLEEP", d.Seconds()).Err()
	}()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
	})
	time.Sleep(20 * time.Millisecond)
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

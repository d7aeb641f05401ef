package fuzz_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// env is what a fuzz target shares between its inputs (each fuzzing
// worker process has its own): a miniredis whose TTLs never run down
// (ClockTTL stays off, so nothing expires during a sequence) and two
// Clients on it.
type env struct {
	m       *miniredis.Miniredis
	rdb     *redis.Client
	clients [2]*relock.Client
	inputs  int
}

func newEnv(f *testing.F) *env {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	e := &env{m: m, rdb: redis.NewClient(&redis.Options{Addr: m.Addr()})}
	f.Cleanup(func() { _ = e.rdb.Close() })
	for i := range e.clients {
		c := relock.New(e.rdb)
		f.Cleanup(func() { _ = c.Close() })
		e.clients[i] = c
	}
	return e
}

// reset clears the previous input's keys and returns a lock name new to
// the env.
func (e *env) reset() string {
	e.m.FlushAll()
	e.inputs++
	return "fz." + strconv.Itoa(e.inputs)
}

// lease is every sequence handle's fixed lease: long enough that no local
// deadline passes during a sequence, and no watchdog renews anything.
const lease = time.Hour

// sentinels are the errors relock documents; every error a call returns
// must match the one the model expects, which is one of them.
var sentinels = []error{relock.ErrNotHeld, relock.ErrNotObtained, relock.ErrAlreadyHeld,
	relock.ErrUpgrade, relock.ErrInvalidName, relock.ErrInvalidOption, relock.ErrNilClient,
	relock.ErrClosed, relock.ErrLeaseExpired, relock.ErrLockGone, relock.ErrNotReplicated,
	relock.ErrCapacityMismatch}

// input reads a fuzz input byte by byte; past its end it reads zeros.
type input struct{ b []byte }

func (in *input) more() bool { return len(in.b) > 0 }

func (in *input) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

// hangGuard crashes the process, with every goroutine's stack, if the
// input it is called for runs for more than 30 s (a call that hangs);
// call the function it returns when the input is done.
func hangGuard(what string) func() {
	timer := time.AfterFunc(30*time.Second, func() {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("input %s still runs after 30 s:\n%s", what, buf))
	})
	return func() { timer.Stop() }
}

// noTokens fails t if text shows (half of) one of tokens.
func noTokens(t *testing.T, text string, tokens map[string]*owner) {
	t.Helper()
	for tok := range tokens {
		if len(tok) >= 16 && strings.Contains(text, tok[:16]) {
			t.Fatalf("an owner token in %q", text)
		}
	}
}

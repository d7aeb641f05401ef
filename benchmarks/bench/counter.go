package bench

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// Counter counts the Redis commands and round trips of the clients it is
// attached to. A pipeline is one round trip however many commands it
// holds; the commands that set up a connection are not counted. The DELs
// of done requests' records that a relock.Client sends in the background
// (one every 100 ms at most, for all its handles) are counted apart, as
// Sweeps: they are no command of the operation measured. The zero value
// is ready to use; it is safe for concurrent use.
type Counter struct {
	cmds   atomic.Int64
	trips  atomic.Int64
	sweeps atomic.Int64

	tracing atomic.Bool
	mu      sync.Mutex
	trace   []Trip
}

// Trip is one traced round trip.
type Trip struct {
	At       time.Time
	Commands int64
}

// Count is a snapshot of a Counter.
type Count struct {
	Commands   int64 `json:"commands"`
	RoundTrips int64 `json:"round_trips"`
	// Sweeps is the DELs of request records sent in the background.
	Sweeps int64 `json:"sweeps"`
}

// Sub returns c - o.
func (c Count) Sub(o Count) Count {
	return Count{Commands: c.Commands - o.Commands, RoundTrips: c.RoundTrips - o.RoundTrips, Sweeps: c.Sweeps - o.Sweeps}
}

// withSweeps returns c with its sweeps counted as commands, for the
// measurements of all a client sends.
func (c Count) withSweeps() Count {
	c.Commands += c.Sweeps
	return c
}

// Add records cmds commands sent in trips round trips, for clients that
// have no go-redis hook (a peer library's own client).
func (c *Counter) Add(cmds, trips int64) {
	c.cmds.Add(cmds)
	c.trips.Add(trips)
	if c.tracing.Load() {
		c.mu.Lock()
		c.trace = append(c.trace, Trip{At: time.Now(), Commands: cmds})
		c.mu.Unlock()
	}
}

// StartTrace starts recording every round trip with its time.
func (c *Counter) StartTrace() {
	c.mu.Lock()
	c.trace = nil
	c.mu.Unlock()
	c.tracing.Store(true)
}

// StopTrace stops recording and returns the round trips recorded.
func (c *Counter) StopTrace() []Trip {
	c.tracing.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trace
	c.trace = nil
	return t
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Count {
	return Count{Commands: c.cmds.Load(), RoundTrips: c.trips.Load(), Sweeps: c.sweeps.Load()}
}

// Hook returns a go-redis hook that counts into c.
func (c *Counter) Hook() redis.Hook { return counterHook{c} }

type counterHook struct{ c *Counter }

func (h counterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (h counterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case core.IsSweep(cmd):
			h.c.sweeps.Add(1)
		case !handshake(cmd):
			h.c.Add(1, 1)
		}
		return next(ctx, cmd)
	}
}

func (h counterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, cmd := range cmds {
			switch {
			case core.IsSweep(cmd):
				h.c.sweeps.Add(1)
			case !handshake(cmd):
				n++
			}
		}
		if n > 0 {
			h.c.Add(n, 1)
		}
		return next(ctx, cmds)
	}
}

// handshake reports whether cmd is one that go-redis sends when it sets up
// a connection (newer go-redis releases send HELLO and CLIENT SETINFO
// through the hooks): not a command of the lock, and counted by neither
// the kinds nor the floors.
func handshake(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "auth", "select", "readonly", "client":
		return true
	}
	return false
}

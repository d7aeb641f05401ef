package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// Counter is a go-redis hook that counts the commands a client sends for
// its caller, a pipeline counting one per command and one round trip in
// all. The commands go-redis sends to set up a new connection (HELLO,
// AUTH, SELECT, CLIENT SETINFO...; newer go-redis releases send them
// through the hooks) are not counted: relock sends none of them. Nor are
// the DELs of done requests' records (see core.Sweeper), which are
// counted apart (Sweeps): a Client sends one every SweepInterval at most,
// for the records of all its handles.
type Counter struct {
	cmds   atomic.Int64
	trips  atomic.Int64
	sweeps atomic.Int64

	mu    sync.Mutex
	names []string // the first maxNames commands counted, by name
}

// maxNames bounds what a Counter remembers of the commands it counted.
const maxNames = 16

// Names returns the names of the first commands counted (up to 16; a
// function's or script's name is its first argument), for a failure
// message that says what was sent. Arguments are never kept: they may
// hold owner tokens.
func (c *Counter) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

func (c *Counter) remember(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.names) < maxNames {
		name := cmd.FullName()
		if args := cmd.Args(); (name == "fcall" || name == "fcall_ro") && len(args) > 1 {
			name = fmt.Sprint(name, " ", args[1]) // the function's name
		}
		c.names = append(c.names, name)
	}
}

// Commands is the number of commands sent so far, sweeps aside.
func (c *Counter) Commands() int64 { return c.cmds.Load() }

// Sweeps is the number of DELs of request records sent so far.
func (c *Counter) Sweeps() int64 { return c.sweeps.Load() }

// RoundTrips is the number of round trips (a pipeline is one).
func (c *Counter) RoundTrips() int64 { return c.trips.Load() }

// Reset sets the counts to zero.
func (c *Counter) Reset() {
	c.cmds.Store(0)
	c.trips.Store(0)
	c.sweeps.Store(0)
	c.mu.Lock()
	c.names = nil
	c.mu.Unlock()
}

// DialHook implements redis.Hook.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case core.IsSweep(cmd):
			c.sweeps.Add(1)
		case !Handshake(cmd):
			c.cmds.Add(1)
			c.trips.Add(1)
			c.remember(cmd)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			switch {
			case core.IsSweep(cmd):
				c.sweeps.Add(1)
			case !Handshake(cmd):
				n++
				c.remember(cmd)
			}
		}
		if n > 0 {
			c.cmds.Add(int64(n))
			c.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// Handshake reports whether cmd is one that go-redis sends when it sets up
// a connection (go-redis 9.23 sends them through the hooks, 9.7 did not).
func Handshake(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "auth", "select", "readonly", "client":
		return true
	}
	return false
}

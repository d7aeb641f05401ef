package redistest

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// LoseReply is a go-redis hook that loses one reply on the wire, as a
// network that drops it: once armed with a pattern, the first command
// written that contains it is sent and runs, but its reply (unless it is
// an error reply: NOSCRIPT, a Cluster's redirect or refusal, which pass)
// is read and discarded, and the client is told its read timed out.
// go-redis then gives the connection up and, with retries on (a Client's
// MaxRetries, a ClusterClient's redirects), sends the command again: a
// script runs twice, the second run later than the first by however long
// OnLost took (the time the client waits for the lost reply).
//
// Install it with Install before the client sends anything (its hook wraps
// the connections the client dials).
type LoseReply struct {
	// OnLost, if set, runs once the reply is lost and before the client
	// hears of it; it may wait for what happens meanwhile (a waiter woken
	// by the command taking the lock).
	OnLost func()
	// Lost counts the replies lost.
	Lost atomic.Int64

	armed atomic.Pointer[[]byte]
}

// Arm makes the next command containing pattern lose its reply.
func (l *LoseReply) Arm(pattern []byte) { l.armed.Store(&pattern) }

// Install adds l to rdb, a *redis.Client or (on each of its nodes) a
// *redis.ClusterClient.
func (l *LoseReply) Install(rdb redis.UniversalClient) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(l) })
		return
	}
	rdb.AddHook(l)
}

// DialHook implements redis.Hook: the connections it dials lose replies.
func (l *LoseReply) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &loseConn{Conn: c, l: l}, nil
	}
}

// ProcessHook implements redis.Hook.
func (l *LoseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook implements redis.Hook.
func (l *LoseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// loseConn is one connection of a LoseReply. go-redis writes a command
// and reads its reply from one goroutine at a time, so its fields need no
// lock.
type loseConn struct {
	net.Conn
	l       *LoseReply
	pattern *[]byte // the armed pattern the command in flight contains
}

func (c *loseConn) Write(b []byte) (int, error) {
	if p := c.l.armed.Load(); p != nil && bytes.Contains(b, *p) {
		c.pattern = p
	}
	return c.Conn.Write(b)
}

func (c *loseConn) Read(b []byte) (int, error) {
	p := c.pattern
	if p == nil {
		return c.Conn.Read(b)
	}
	n, err := c.Conn.Read(b)
	if n == 0 {
		return n, err
	}
	c.pattern = nil
	if b[0] == '-' || !c.l.armed.CompareAndSwap(p, nil) {
		return n, err // an error reply, or another connection lost one first
	}
	c.l.Lost.Add(1)
	if c.l.OnLost != nil {
		c.l.OnLost()
	}
	return 0, os.ErrDeadlineExceeded
}

package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is one pub/sub connection of a Hub: the only one on a single server
// or a Cluster, one per shard on a Ring. It lives until the Hub closes,
// unless it fails to open.
type conn struct {
	shard string

	// sendMu orders SUBSCRIBE and UNSUBSCRIBE writes as their decisions
	// were made under Hub.mu; it is taken before Hub.mu is released. The
	// goroutine that opens the connection holds it until ps is set (or
	// err, when opening failed), so later writes wait for the connection.
	// Lock order: Hub.mu, then sendMu; Hub.mu is never taken under sendMu.
	sendMu sync.Mutex
	ps     *redis.PubSub // written once, under sendMu
	err    error         // why opening failed; written like ps

	// Set with ps: the receiver's context (cancelled by close, so that
	// a reconnection in progress gives up) and its exit.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// sendTimeout bounds the dial of a SUBSCRIBE or UNSUBSCRIBE write (go-redis
// bounds the write itself by its WriteTimeout), so a waiter, and Close, do
// not wait for an unreachable server for long. A write that fails is not
// lost: go-redis keeps the channel and subscribes it on its next connection.
const sendTimeout = confirmWait

// dial opens a pub/sub connection subscribed to channels, routed by the
// first one on a Ring. go-redis's Ring panics when no shard is up (and on a
// closed Ring): the panic is returned as an error. The caller holds only
// the connection's sendMu, and releases it whatever dial returns.
func (h *Hub) dial(channels []string) (ps *redis.PubSub, err error) {
	if !h.route.allUp() {
		// With a shard down the Ring may route the channel to another
		// shard, and the connection would stay there once the shard is
		// back: waiters are better off on their timers until it is.
		return nil, fmt.Errorf("notify: subscribe %q: a ring shard is down", channels[0])
	}
	defer func() {
		if p := recover(); p != nil {
			ps = nil
			if perr, ok := p.(error); ok {
				err = fmt.Errorf("notify: subscribe %q: %w", channels[0], perr)
			} else {
				err = fmt.Errorf("notify: subscribe %q: %v", channels[0], p)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	ps = h.rdb.Subscribe(ctx, channels...)
	if !h.route.allUp() {
		// A shard went down while subscribing: the route may be wrong.
		_ = ps.Close()
		return nil, fmt.Errorf("notify: subscribe %q: a ring shard went down", channels[0])
	}
	return ps, nil
}

// send writes SUBSCRIBE or UNSUBSCRIBE for name; the caller holds sendMu.
// It fails only when the connection could not be opened: a failed write
// shows as a missing confirmation, which the waiter's timer covers.
func (c *conn) send(subscribe bool, name string) error {
	if c.ps == nil {
		return c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if subscribe {
		_ = c.ps.Subscribe(ctx, name)
	} else {
		_ = c.ps.Unsubscribe(ctx, name)
	}
	return nil
}

// close closes the connection, if it was opened, and waits for its
// receiver. An open or a write in progress finishes first: each is bounded
// by sendTimeout and go-redis's WriteTimeout.
func (c *conn) close() error {
	c.sendMu.Lock()
	ps := c.ps
	c.sendMu.Unlock()
	if ps == nil {
		return nil
	}
	c.cancel()
	err := ps.Close()
	<-c.done
	return err
}

// receive dispatches the messages of c until the hub closes.
func (h *Hub) receive(c *conn) {
	defer close(c.done)
	for {
		msg, err := c.ps.ReceiveTimeout(c.ctx, healthInterval)
		if err != nil {
			if h.isClosed() {
				return
			}
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				_ = c.ps.Ping(c.ctx)
				continue
			}
			// The connection broke: messages may have been lost. go-redis
			// reconnects and resubscribes on the next receive; meanwhile
			// every waiter of this connection tries again instead of
			// trusting the channel.
			h.reset(c)
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		h.dispatch(msg)
	}
}

package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// conn is one pub/sub connection of a Hub: the only one on a single server
// or a Cluster, one per shard on a Ring. It lives until the Hub closes,
// unless it fails to open. Its fields are guarded by Hub.mu.
type conn struct {
	shard string

	// queue holds the SUBSCRIBEs and UNSUBSCRIBEs decided under Hub.mu and
	// not yet written, in the order they were decided. While draining, a
	// goroutine (drain) writes them; apart from the receiver and Close,
	// which closes it, nothing else does I/O on the connection, and none
	// of them holds Hub.mu while it does.
	queue    []op
	draining bool

	// ps is set once the connection is open (by drain, while the hub is
	// open); then a receiver runs until the hub closes.
	ps *redis.PubSub
}

// op is a SUBSCRIBE or UNSUBSCRIBE of one channel.
type op struct {
	name      string
	subscribe bool
}

// sendTimeout bounds the dial of a connection or of a reconnection for a
// write (go-redis honours a ctx while it dials, not while it reads or
// writes: it bounds the handshake by its ReadTimeout and a write by its
// WriteTimeout). A write that fails is not lost: go-redis keeps the
// channel and subscribes it on its next connection.
const sendTimeout = confirmWait

// queueLocked appends o to c's queue and starts a writer if none runs. The
// caller holds h.mu, and the hub is open.
func (h *Hub) queueLocked(c *conn, o op) {
	c.queue = append(c.queue, o)
	if c.draining {
		return
	}
	c.draining = true
	h.wg.Add(1)
	go h.drain(c)
}

// drain opens c if it is not open yet, then writes c's queue, in order,
// until it is empty or the hub closes.
func (h *Hub) drain(c *conn) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		if h.closed || len(c.queue) == 0 {
			c.draining = false
			h.mu.Unlock()
			return
		}
		ops, ps := c.queue, c.ps
		c.queue = nil
		h.mu.Unlock()

		if ps == nil {
			// A new connection's queue starts with SUBSCRIBEs: one command
			// sends them all as it opens (the first one on a Cluster,
			// where one SSUBSCRIBE takes channels of one slot only).
			n := 0
			for n < len(ops) && ops[n].subscribe && !(h.sharded && n == 1) {
				n++
			}
			var err error
			if ps, err = h.dial(c.shard, names(ops[:n])); !h.opened(c, ps, err) {
				return
			}
			ops = ops[n:]
		}
		h.write(c, ps, ops)
	}
}

// opened records the outcome of dialling c and reports whether c is now
// open. On failure c is forgotten: the waiters of its channels are told,
// and the next Subscribe of the shard opens a new connection, which
// subscribes them again. A connection opened after the hub closed is
// closed at once.
func (h *Hub) opened(c *conn, ps *redis.PubSub, err error) bool {
	h.mu.Lock()
	c.draining = err == nil && !h.closed
	switch {
	case h.closed:
		h.mu.Unlock()
		if ps != nil {
			_ = ps.Close()
		}
		return false
	case err != nil:
		defer h.mu.Unlock()
		h.forgetLocked(c, err)
		if h.sharded {
			// The master may have failed over: find the new one.
			h.rerouteLocked()
		}
		return false
	}
	c.ps = ps
	h.wg.Add(1)
	go h.receive(c, ps)
	h.mu.Unlock()
	return true
}

// dial opens a pub/sub connection subscribed to channels, routed by the
// first one on a Ring. go-redis's Ring panics when no shard is up (and on a
// closed Ring): the panic is returned as an error. It may take as long as
// go-redis's ReadTimeout (the handshake); the caller holds no lock.
func (h *Hub) dial(shardName string, channels []string) (ps *redis.PubSub, err error) {
	if h.route.state() != shard.Exact {
		// With a shard down the Ring may route the channel to another
		// shard, and the connection would stay there once the shard is
		// back: waiters are better off on their timers until it is.
		return nil, connErr(shardName, errors.New("not every ring shard is up"))
	}
	defer func() {
		if p := recover(); p != nil {
			ps = nil
			if perr, ok := p.(error); ok {
				err = connErr(shardName, perr)
			} else {
				err = connErr(shardName, fmt.Errorf("%v", p))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(h.ctx, sendTimeout)
	defer cancel()
	if h.sharded {
		// Opened on the master of the first channel's slot, all of
		// whose channels these are. A failed open is reported (go-redis
		// would open it later on any node).
		ps = h.route.cluster.SSubscribe(ctx)
		if err := ps.SSubscribe(ctx, channels...); err != nil {
			_ = ps.Close()
			return nil, fmt.Errorf("notify: open sharded pub/sub connection to cluster master %s: %w", shardName, err)
		}
		return ps, nil
	}
	ps = h.rdb.Subscribe(ctx, channels...)
	if h.route.state() != shard.Exact {
		// A shard went down while subscribing: the route may be wrong.
		_ = ps.Close()
		return nil, connErr(shardName, errors.New("a ring shard went down"))
	}
	return ps, nil
}

// connErr is err while opening the connection of shardName. It names the
// shard, never a channel: a fair waiter's channel carries its owner token.
func connErr(shardName string, err error) error {
	if shardName == "" {
		return fmt.Errorf("notify: open pub/sub connection: %w", err)
	}
	return fmt.Errorf("notify: open pub/sub connection to ring shard %q: %w", shardName, err)
}

// write sends ops in order, each run of SUBSCRIBEs or UNSUBSCRIBEs as one
// command; on a Cluster one SSUBSCRIBE or SUNSUBSCRIBE per channel, since
// one command may only name channels of one slot. A failed write shows as a
// missing confirmation, which the waiter's timer covers; on a Cluster it
// also drops the connection.
func (h *Hub) write(c *conn, ps *redis.PubSub, ops []op) {
	for len(ops) > 0 {
		n := 1
		for n < len(ops) && ops[n].subscribe == ops[0].subscribe && !h.sharded {
			n++
		}
		wctx, cancel := context.WithTimeout(h.ctx, sendTimeout)
		chans := names(ops[:n])
		var err error
		switch {
		case ops[0].subscribe && h.sharded:
			err = ps.SSubscribe(wctx, chans...)
		case ops[0].subscribe:
			_ = ps.Subscribe(wctx, chans...)
		case h.sharded:
			err = ps.SUnsubscribe(wctx, chans...)
		default:
			_ = ps.Unsubscribe(wctx, chans...)
		}
		cancel()
		if err != nil && h.ctx.Err() == nil {
			// go-redis may have reconnected to any node of the cluster:
			// drop the connection; its channels are routed afresh.
			h.drop(c, ps)
			return
		}
		ops = ops[n:]
	}
}

func names(ops []op) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.name
	}
	return out
}

// receive dispatches the messages of c until the hub closes.
func (h *Hub) receive(c *conn, ps *redis.PubSub) {
	defer h.wg.Done()
	broken := false
	backoff := 50 * time.Millisecond
	health := healthInterval
	if h.sharded {
		health = clusterHealthInterval
	}
	// pinged: a PING went out after a quiet interval, and nothing came
	// back since.
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(h.ctx, health)
		if err != nil {
			if h.ctx.Err() != nil {
				return // closed
			}
			if isRefusal(err) {
				h.refuse(err)
				continue
			}
			if rerr := redis.Error(nil); errors.As(err, &rerr) {
				if h.sharded && !strings.Contains(strings.ToLower(err.Error()), "ping") {
					// An error reply to a SSUBSCRIBE (MOVED, CLUSTERDOWN,
					// CROSSSLOT): a channel is not served here. Drop the
					// connection; its channels are routed afresh.
					h.drop(c, ps)
					return
				}
				pinged = false
				continue // a reply, such as a refused PING: the connection is alive
			}
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				if !h.sharded {
					_ = ps.Ping(h.ctx)
					continue
				}
				if pinged {
					// A whole interval without an answer to a PING: the
					// master froze or is cut off (a failover may have
					// replaced it), though the connection looks open.
					h.drop(c, ps)
					return
				}
				pinged = true
				if err := ps.Ping(h.ctx); err != nil && h.ctx.Err() == nil {
					h.drop(c, ps)
					return
				}
				continue
			}
			if h.sharded {
				// go-redis would reconnect to any node of the cluster,
				// not to the channels' master: drop the connection.
				h.drop(c, ps)
				return
			}
			// The connection broke: messages may have been lost. go-redis
			// reconnects and resubscribes on the next receive; meanwhile
			// every waiter of this connection tries again instead of
			// trusting the channel, once: then its timer paces it.
			if !broken {
				broken = true
				h.reset(c)
			}
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		pinged = false
		if broken {
			// Back: wake-ups published while it was down were lost.
			broken, backoff = false, 50*time.Millisecond
			h.reset(c)
		}
		h.dispatch(msg)
	}
}

// drop forgets c, a Cluster's connection that broke, and closes it: the
// waiters of its channels are woken once (messages may have been lost)
// and rely on their timers; the next Subscribe of each channel routes it
// afresh and opens a connection to its master.
func (h *Hub) drop(c *conn, ps *redis.PubSub) {
	h.mu.Lock()
	h.forgetLocked(c, nil)
	h.rerouteLocked()
	h.mu.Unlock()
	_ = ps.Close()
}

// forgetLocked forgets c and leaves its channels without a connection: a
// waiter still waiting for a channel's confirmation is told err (nil: the
// subscription is as good as it gets); with err nil, a connection that
// was open, every waiter is woken once, since messages may have been
// lost. The caller holds h.mu.
func (h *Hub) forgetLocked(c *conn, err error) {
	if h.conns[c.shard] == c {
		delete(h.conns, c.shard)
	}
	c.queue = nil
	for name, ch := range h.chans {
		if ch.conn != c {
			continue
		}
		ch.conn, ch.idle = nil, false
		ch.pendingSub, ch.pendingUnsub = 0, 0
		ch.markReady(err)
		if err == nil {
			ch.wakeAll()
		}
		if ch.refs == 0 {
			delete(h.chans, name)
		}
	}
}

// rerouteLocked starts a reroute goroutine unless one runs or the hub is
// closed. The caller holds h.mu.
func (h *Hub) rerouteLocked() {
	if h.rerouting || h.closed {
		return
	}
	h.rerouting = true
	h.wg.Add(1)
	go h.reroute()
}

// reroute subscribes again, each on the connection of its master, the
// channels of a Cluster that have waiters but no connection (a dropped
// connection's, a moved slot's, a failed dial's). It first asks the
// cluster client to reload its view of the cluster (a master may have
// failed over), waits a little, then routes them afresh; it repeats with
// a growing wait, up to rerouteMax, while any remains, and ends when none
// does or the hub closes. A subscription that fails again leaves its
// channel without a connection for the next turn.
func (h *Hub) reroute() {
	defer h.wg.Done()
	delay := rerouteMin
	for {
		h.route.cluster.ReloadState(h.ctx)
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(delay):
		}
		h.mu.Lock()
		var orphans []string
		for name, ch := range h.chans {
			if ch.conn == nil && ch.refs > 0 {
				orphans = append(orphans, name)
			}
		}
		if len(orphans) == 0 || h.closed {
			h.rerouting = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		for _, name := range orphans {
			ctx, cancel := context.WithTimeout(h.ctx, sendTimeout)
			shardName, err := h.route.route(ctx, name)
			cancel()
			if err != nil {
				continue
			}
			h.mu.Lock()
			if ch := h.chans[name]; ch != nil && ch.conn == nil && ch.refs > 0 && !h.closed {
				ch.shard = shardName
				h.attachLocked(ch)
			}
			h.mu.Unlock()
		}
		delay = min(2*delay, rerouteMax)
	}
}

// rerouteMin and rerouteMax bound the wait between two turns of reroute.
const (
	rerouteMin = 100 * time.Millisecond
	rerouteMax = 2 * time.Second
)

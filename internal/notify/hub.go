// Package notify delivers lock wake-ups to waiters over pub/sub connections
// shared by every waiter of one relock.Client: one connection on a single
// server or a Cluster, one per shard on a go-redis Ring.
//
// Each channel is subscribed once, however many local waiters want it
// (reference-counted), and unsubscribed when the last one leaves. A release
// publishes "1" (wake one waiter) or "*" (wake every waiter). Delivery is
// best effort: a message published while the connection is down is lost, so
// every waiter also bounds its wait with a timer.
//
// On a Cluster, classic PUBLISH reaches every node, so one connection to
// any node hears every channel. A Ring does not broadcast: a release
// publishes on the shard that holds its lock (the channel shares the
// lock's {hash tag}), so the hub subscribes each channel on the connection
// to the shard the Ring routes it to, computed as the Ring does (its
// consistent hash over the shard names, applied to the channel's hash tag).
// Limits on a Ring:
//   - While a shard is down the Ring reroutes its keys to other shards, and
//     a wake-up may be published on a shard whose connection does not
//     listen for it: waiters then fall back on their timers (at most a
//     second apart) until the shard is back.
//   - A shard's connection is opened only while every shard is up, since
//     only then does the Ring route its first channel to that shard; until
//     then Subscribe fails and the waiter relies on its timer.
//   - The shards are those of the Ring's options when the hub was made:
//     changes made with Ring.SetAddrs are not followed.
package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Payloads of wake-up messages.
const (
	WakeOne = "1"
	WakeAll = "*"
)

// confirmWait bounds how long Subscribe waits for Redis to confirm a new
// subscription; past it the waiter goes on and relies on its timer.
const confirmWait = time.Second

// healthInterval is how long a receiver waits for traffic before it
// pings, so that a dead connection is noticed and replaced.
const healthInterval = 15 * time.Second

// errClosed is what Subscribe returns once the hub is closed.
var errClosed = errors.New("notify: hub closed")

// Hub multiplexes wake-up channels over a few pub/sub connections. Its
// methods are safe for concurrent use.
type Hub struct {
	rdb   redis.UniversalClient
	route router

	mu     sync.Mutex
	conns  map[string]*conn // by shard; opened on first use
	chans  map[string]*channel
	closed bool
}

type channel struct {
	shard        string
	conn         *conn // the connection it is subscribed on; nil if none
	refs         int
	pendingSub   int // SUBSCRIBEs sent, not yet confirmed
	pendingUnsub int // UNSUBSCRIBEs sent, not yet confirmed
	ready        chan struct{}
	subs         []*Sub
}

// Sub is one waiter's interest in one channel.
type Sub struct {
	// C receives a value when the waiter should try again.
	C <-chan struct{}

	c     chan struct{}
	hub   *Hub
	name  string
	ready chan struct{}
}

// New returns a hub on rdb. It opens no connection until the first
// Subscribe.
func New(rdb redis.UniversalClient) *Hub {
	return &Hub{
		rdb:   rdb,
		route: newRouter(rdb),
		conns: make(map[string]*conn),
		chans: make(map[string]*channel),
	}
}

// Shard names the connection that channel is subscribed on: the shard a
// Ring routes it to (while every shard is up), or "" on other clients.
func (h *Hub) Shard(channel string) string { return h.route.hash(channel) }

// Subscribe registers interest in name and waits (bounded by ctx and by a
// short timeout) until Redis has confirmed the subscription, so a wake-up
// published after Subscribe returns is seen. The caller must Close the Sub.
// It fails when the hub is closed, when ctx ends, or when the connection
// name needs could not be opened (on a Ring while a shard is down); the
// waiter can then still wait on its timer.
func (h *Hub) Subscribe(ctx context.Context, name string) (*Sub, error) {
	shard := h.route.hash(name)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errClosed
	}
	ch := h.chans[name]
	if ch == nil {
		ch = &channel{shard: shard}
		h.chans[name] = ch
	}
	ch.refs++
	var c *conn
	var open []string // channels the new connection subscribes to
	// The first waiter subscribes; so does a later one when the channel's
	// connection failed to open.
	if ch.refs == 1 || ch.conn == nil {
		ch.ready = make(chan struct{})
		if c = h.conns[shard]; c == nil {
			c = &conn{shard: shard}
			h.conns[shard] = c
			open = h.orphansLocked(name)
			for _, n := range open {
				h.chans[n].conn = c
				h.chans[n].pendingSub++
			}
		} else {
			ch.conn = c
			ch.pendingSub++
		}
	}
	sc := make(chan struct{}, 1)
	s := &Sub{C: sc, c: sc, hub: h, name: name, ready: ch.ready}
	ch.subs = append(ch.subs, s)
	if c != nil {
		c.sendMu.Lock()
		h.mu.Unlock()
		var err error
		if open != nil {
			err = h.open(c, open)
		} else {
			err = c.send(true, name)
		}
		c.sendMu.Unlock()
		if err != nil {
			if open != nil {
				h.fail(c)
			}
			s.Close()
			return nil, err
		}
	} else {
		h.mu.Unlock()
	}
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-s.ready:
	case <-t.C:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	return s, nil
}

// orphansLocked returns first, then every other channel of first's shard
// that has waiters but no connection (its shard's connection failed to
// open): a new connection subscribes them all.
func (h *Hub) orphansLocked(first string) []string {
	shard := h.chans[first].shard
	out := []string{first}
	for n, ch := range h.chans {
		if n != first && ch.shard == shard && ch.conn == nil && ch.refs > 0 {
			out = append(out, n)
		}
	}
	return out
}

// open dials c subscribed to channels (one SUBSCRIBE for all: they are
// not sent again) and starts its receiver. The caller holds c.sendMu, and
// releases it before calling fail if open returns an error.
func (h *Hub) open(c *conn, channels []string) error {
	ps, err := h.dial(channels)
	if err != nil {
		c.err = err
		return err
	}
	// Even if the hub closed meanwhile: Close waits for sendMu, then
	// closes ps and waits for the receiver.
	c.ps = ps
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.done = make(chan struct{})
	go h.receive(c)
	return nil
}

// fail forgets c, which could not be opened, and tells the waiters of its
// channels not to wait for a confirmation; the next Subscribe of the shard
// opens a new connection, which subscribes them again. It takes h.mu, so
// it must be called without c.sendMu (h.mu is taken before sendMu).
func (h *Hub) fail(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[c.shard] == c {
		delete(h.conns, c.shard)
	}
	for n, ch := range h.chans {
		if ch.conn != c {
			continue
		}
		ch.conn = nil
		ch.pendingSub, ch.pendingUnsub = 0, 0
		ch.markReady()
		if ch.refs == 0 {
			delete(h.chans, n)
		}
	}
}

// Close withdraws the interest. A wake-up it had received but not consumed
// is passed on to another waiter of the same channel. Closing a Sub twice
// does nothing.
func (s *Sub) Close() {
	h := s.hub
	h.mu.Lock()
	ch := h.chans[s.name]
	if ch == nil {
		h.mu.Unlock()
		return
	}
	found := false
	for i, o := range ch.subs {
		if o == s {
			ch.subs = append(ch.subs[:i], ch.subs[i+1:]...)
			ch.refs--
			found = true
			break
		}
	}
	if !found {
		h.mu.Unlock()
		return
	}
	select {
	case <-s.c:
		ch.wakeOne()
	default:
	}
	if ch.refs > 0 || h.closed {
		h.mu.Unlock()
		return
	}
	c := ch.conn
	if c == nil {
		if ch.pendingSub == 0 && ch.pendingUnsub == 0 {
			delete(h.chans, s.name)
		}
		h.mu.Unlock()
		return
	}
	ch.pendingUnsub++
	c.sendMu.Lock()
	h.mu.Unlock()
	// If c failed to open meanwhile, open has already forgotten the
	// channel and this does nothing.
	_ = c.send(false, s.name)
	c.sendMu.Unlock()
}

// Channels is the number of channels with local waiters.
func (h *Hub) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ch := range h.chans {
		if ch.refs > 0 {
			n++
		}
	}
	return n
}

// Close closes every connection and waits for their receivers. Waiters are
// woken and stop waiting for confirmations. Each connection is closed once
// any open or write in progress on it ends (bounded by go-redis's
// WriteTimeout and a one-second dial limit); connections close in parallel.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, ch := range h.chans {
		ch.markReady()
		ch.wakeAll()
	}
	conns := make([]*conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (h *Hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func (h *Hub) dispatch(msg any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Message:
		ch := h.chans[m.Channel]
		if ch == nil {
			return
		}
		if m.Payload == WakeAll {
			ch.wakeAll()
		} else {
			ch.wakeOne()
		}
	case *redis.Subscription:
		ch := h.chans[m.Channel]
		if ch == nil {
			return
		}
		switch m.Kind {
		case "subscribe":
			if ch.pendingSub > 0 {
				ch.pendingSub--
			}
			if ch.pendingSub == 0 && ch.refs > 0 {
				ch.markReady()
			}
		case "unsubscribe":
			if ch.pendingUnsub > 0 {
				ch.pendingUnsub--
			}
		}
		if ch.refs == 0 && ch.pendingSub == 0 && ch.pendingUnsub == 0 {
			delete(h.chans, m.Channel)
		}
	}
}

// reset treats every channel of c as confirmed and wakes every waiter, after
// c broke and messages may have been lost.
func (h *Hub) reset(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, ch := range h.chans {
		if ch.conn != c {
			continue
		}
		ch.pendingSub, ch.pendingUnsub = 0, 0
		ch.markReady()
		ch.wakeAll()
		if ch.refs == 0 {
			delete(h.chans, name)
		}
	}
}

func (ch *channel) markReady() {
	if ch.ready == nil {
		return
	}
	select {
	case <-ch.ready:
	default:
		close(ch.ready)
	}
}

// wakeOne gives a wake-up to the first waiter that has none pending and
// moves it to the back, so wake-ups rotate among local waiters.
func (ch *channel) wakeOne() {
	for i, s := range ch.subs {
		select {
		case s.c <- struct{}{}:
			ch.subs = append(append(ch.subs[:i:i], ch.subs[i+1:]...), s)
			return
		default:
		}
	}
}

func (ch *channel) wakeAll() {
	for _, s := range ch.subs {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// Package notify delivers lock wake-ups to waiters through one shared
// pub/sub connection per relock.Client.
//
// Each channel is subscribed once, however many local waiters want it
// (reference-counted), and unsubscribed when the last one leaves. A release
// publishes "1" (wake one waiter) or "*" (wake every waiter). Delivery is
// best effort: a message published while the connection is down is lost, so
// every waiter also bounds its wait with a timer.
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

// healthInterval is how long the receiver waits for traffic before it
// pings, so that a dead connection is noticed and replaced.
const healthInterval = 15 * time.Second

// Hub multiplexes wake-up channels over one subscription. Its methods are
// safe for concurrent use.
type Hub struct {
	rdb redis.UniversalClient

	// sendMu orders SUBSCRIBE and UNSUBSCRIBE writes as their decisions
	// were made under mu; it is taken before mu is released.
	sendMu sync.Mutex

	mu     sync.Mutex
	ps     *redis.PubSub // nil until the first Subscribe
	chans  map[string]*channel
	closed bool
	done   chan struct{} // closed when the receiver has exited
}

type channel struct {
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
	return &Hub{rdb: rdb, chans: make(map[string]*channel)}
}

// Subscribe registers interest in name and waits (bounded by ctx and by a
// short timeout) until Redis has confirmed the subscription, so a wake-up
// published after Subscribe returns is seen. The caller must Close the Sub.
func (h *Hub) Subscribe(ctx context.Context, name string) (*Sub, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("notify: hub closed")
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.Background())
		h.done = make(chan struct{})
		go h.receive(h.ps, h.done)
	}
	ch := h.chans[name]
	if ch == nil {
		ch = &channel{}
		h.chans[name] = ch
	}
	ch.refs++
	send := ch.refs == 1
	if send {
		ch.pendingSub++
		ch.ready = make(chan struct{})
	}
	c := make(chan struct{}, 1)
	s := &Sub{C: c, c: c, hub: h, name: name, ready: ch.ready}
	ch.subs = append(ch.subs, s)
	ps := h.ps
	if send {
		h.sendMu.Lock()
		h.mu.Unlock()
		// A failed write surfaces as a missing confirmation, which the
		// waiter's timer covers; go-redis resubscribes on reconnect.
		_ = ps.Subscribe(context.Background(), name)
		h.sendMu.Unlock()
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

// Close withdraws the interest. A wake-up it had received but not consumed
// is passed on to another waiter of the same channel.
func (s *Sub) Close() {
	h := s.hub
	h.mu.Lock()
	ch := h.chans[s.name]
	if ch == nil {
		h.mu.Unlock()
		return
	}
	for i, o := range ch.subs {
		if o == s {
			ch.subs = append(ch.subs[:i], ch.subs[i+1:]...)
			ch.refs--
			break
		}
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
	ch.pendingUnsub++
	ps := h.ps
	h.sendMu.Lock()
	h.mu.Unlock()
	_ = ps.Unsubscribe(context.Background(), s.name)
	h.sendMu.Unlock()
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

// Close closes the pub/sub connection and waits for the receiver to exit.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps, done := h.ps, h.done
	for _, ch := range h.chans {
		ch.wakeAll()
	}
	h.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

func (h *Hub) receive(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	ctx := context.Background()
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			if h.isClosed() {
				return
			}
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				_ = ps.Ping(ctx)
				continue
			}
			// The connection broke: messages may have been lost. go-redis
			// reconnects and resubscribes on the next receive; meanwhile
			// every waiter tries again instead of trusting the channel.
			h.reset()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		h.dispatch(msg)
	}
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

// reset treats every channel as confirmed and wakes every waiter, after
// the connection broke and messages may have been lost.
func (h *Hub) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, ch := range h.chans {
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

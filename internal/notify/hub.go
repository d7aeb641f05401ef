// Package notify delivers lock wake-ups to waiters over pub/sub connections
// shared by every waiter of one relock.Client: one connection on a single
// server or a Cluster, one per shard on a go-redis Ring.
//
// Each channel is subscribed once, however many local waiters want it
// (reference-counted), and unsubscribed Linger after the last one leaves,
// unless a waiter came back meanwhile: a busy lock is waited for again at
// each acquisition, and keeps one subscription instead of a SUBSCRIBE and
// an UNSUBSCRIBE per wait, whose waiter would wait for Redis's
// confirmation before its attempt. A release
// publishes "1" (wake one waiter), "*" (wake every waiter) or a grant for
// one waiter (see GrantPrefix). Delivery is best effort: a message
// published while the connection is down is lost, so every waiter also
// bounds its wait with a timer.
//
// No caller waits for another caller's I/O. Subscribe and Sub.Close only
// record their decision (a SUBSCRIBE or UNSUBSCRIBE to send) in the queue
// of the channel's connection, and a goroutine per connection, started
// when the queue fills and ending when it is empty, opens the connection
// and writes the queue in order. Subscribe then waits for Redis's
// confirmation, bounded by its ctx and by a second: a slow or hung shard
// delays the waiters of its own channels by that much at most, and nobody
// else (wake-ups, Subscribe and Sub.Close on other shards, Close).
//
// On a Cluster the scripts publish with SPUBLISH (sharded pub/sub, Redis
// 7), which only the nodes of the channel's shard deliver (its master, and
// its replicas, a hop later): the hub keeps a sharded connection
// (SSUBSCRIBE) per master that has channels with waiters, at most one per
// master. A channel's master is the one the client's cluster state names
// when its first waiter subscribes; a state that names nobody for its slot
// (while the slot changes hands) makes go-redis pick a random node, which
// refuses the channel (the connection is dropped, and the channel routed
// afresh) unless it is the master or its replica: on the replica the
// channel stays, and its messages reach its waiters (3 runs of 20 of
// TestClusterErrorReply). When a connection breaks (its master died, or
// failed over), the hub closes it instead of letting go-redis reconnect it
// (it would reconnect to any node): the waiters of its channels are woken
// once, then rely on their timers, and the next Subscribe of a channel
// routes it afresh. The same holds for a channel that its node
// unsubscribes (its slot moved). On a Redis before 7, SSUBSCRIBE is
// unknown: the hub reports a refusal and waiters poll (the scripts fall
// back to PUBLISH).
//
// A Ring does not broadcast: a release
// publishes on the shard that holds its lock (the channel shares the
// lock's {hash tag}), so the hub subscribes each channel on the connection
// to the shard the Ring routes it to, computed as the Ring does (its
// consistent hash over the shard names of its options, applied to the
// channel's hash tag; see internal/shard). Limits on a Ring:
//   - A shard's connection is opened only while every shard of the Ring's
//     options is up and no other, since only then is the Ring sure to open
//     it on the computed shard; until then Subscribe fails for the channels
//     of a shard without a connection, and their waiters rely on their
//     timers (at most a second apart).
//   - While a shard is down the Ring reroutes its keys to other shards, and
//     a wake-up may be published on a shard whose connection does not
//     listen for it: waiters then rely on their timers until it is back.
//     Connections already open keep serving the channels of live shards
//     (a consistent hash moves only the keys of the down shard).
//   - The shards are those of the Ring's options when the hub was made.
//     After Ring.SetAddrs removes a shard, not every shard is ever up
//     again: no connection is opened any more and waiters of the channels
//     without one rely on their timers. After SetAddrs adds or replaces a
//     shard (seen within 100 ms), Subscribe fails for every channel, since
//     the routing may differ for any of them. A SetAddrs that renames
//     shards but keeps their addresses is not detected: wake-ups may then
//     go unheard, and waiters rely on their timers.
package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// Payloads of wake-up messages.
const (
	WakeOne = "1"
	WakeAll = "*"
	// GrantPrefix starts a grant: "g|<addr>|<data>" tells the one waiter
	// subscribed with address addr that a release made it the owner; data
	// says what it needs (see Sub.Grant). Nobody else is woken.
	GrantPrefix = "g|"
)

// confirmWait bounds how long Subscribe waits for Redis to confirm a new
// subscription; past it the waiter goes on and relies on its timer.
const confirmWait = time.Second

// Linger is how long a channel stays subscribed after its last local
// waiter left (see the package comment). Messages that arrive meanwhile
// wake nobody.
const Linger = 250 * time.Millisecond

// healthInterval is how long a receiver waits for traffic before it
// pings, so that a dead connection is noticed and replaced.
const healthInterval = 15 * time.Second

// clusterHealthInterval is healthInterval on a Cluster, where a master
// that stops answering (frozen, cut off) is failed over: a connection
// whose PING is not answered within it is dropped and its channels
// routed to the new master, within two intervals of the freeze.
const clusterHealthInterval = 5 * time.Second

// closeGrace bounds how long Close waits for the hub's goroutines.
const closeGrace = 500 * time.Millisecond

var (
	// errClosed is what Subscribe returns once the hub is closed.
	errClosed = errors.New("notify: hub closed")
	// errChanged is what Subscribe returns on a Ring whose shards are no
	// longer those of its options.
	errChanged = errors.New("notify: the ring's shards changed (Ring.SetAddrs): not subscribing")
)

// Hub multiplexes wake-up channels over a few pub/sub connections. Its
// methods are safe for concurrent use.
//
// Locking: mu guards everything below it, the connections' queues and the
// Subs' grants. No I/O, and no call into go-redis that can wait for I/O,
// is ever made under mu, so it is only held for short bookkeeping. mu is
// the hub's only lock; go-redis's PubSub lock and internal/shard's lock
// are only taken without it.
type Hub struct {
	rdb   redis.UniversalClient
	route router
	// sharded: a Cluster's hub, with SSUBSCRIBE connections per master.
	sharded bool

	// ctx is cancelled by Close: receivers stop, and a dial in progress
	// gives up (go-redis honours a ctx while it connects, not while it
	// reads).
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the hub's goroutines (writers, receivers, closers). It is
	// only added to under mu while the hub is open, or by Close.
	wg sync.WaitGroup

	mu        sync.Mutex
	conns     map[string]*conn // by shard; opened on first use
	chans     map[string]*channel
	linger    time.Duration // Linger (tests shorten or lengthen it)
	closed    bool
	rerouting bool // a reroute goroutine runs (Cluster)
	closeErrs []error

	// OnRefused, if set before the first Subscribe, is called once, from
	// the receiving goroutine, when Redis refuses a subscription (an ACL
	// user without channel rights, a proxy without pub/sub): from then on
	// Subscribe fails at once and waiters rely on their timers.
	OnRefused func(err error)
	refused   atomic.Pointer[error]
}

type channel struct {
	name         string
	shard        string
	conn         *conn // the connection it is subscribed on; nil if none
	refs         int
	pendingSub   int // SUBSCRIBEs decided, not yet confirmed
	pendingUnsub int // UNSUBSCRIBEs decided, not yet confirmed
	wait         *confirm
	subs         []*Sub
	// idle: no local waiter, still subscribed on conn (or being
	// subscribed) until linger fires, unless a waiter comes first. An idle
	// channel has a conn: whatever clears conn clears idle.
	idle   bool
	idleAt time.Time // when it last became idle
	linger *time.Timer
}

// confirm is what Subscribe waits for: done is closed when the channel's
// subscription is confirmed or given up on, after err is set if it failed.
// Guarded by Hub.mu until done is closed; immutable after.
type confirm struct {
	done chan struct{}
	err  error
}

func newConfirm() *confirm { return &confirm{done: make(chan struct{})} }

// Sub is one waiter's interest in one channel.
type Sub struct {
	// C receives a value when the waiter should try again, or has been
	// granted the lock (see Grant).
	C <-chan struct{}

	c     chan struct{}
	hub   *Hub
	name  string
	addr  string // grants addressed to it reach this Sub
	grant string // a grant's data, until taken; guarded by hub.mu
	wait  *confirm
}

// Grant returns, and forgets, the data of a grant addressed to this Sub,
// if one arrived.
func (s *Sub) Grant() (string, bool) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	g := s.grant
	s.grant = ""
	return g, g != ""
}

// New returns a hub on rdb. It opens no connection until the first
// Subscribe.
func New(rdb redis.UniversalClient) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	route := newRouter(rdb)
	return &Hub{
		rdb:     rdb,
		route:   route,
		sharded: route.cluster != nil,
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[string]*conn),
		chans:   make(map[string]*channel),
		linger:  Linger,
	}
}

// Shard names the connection that channel is subscribed on: the shard a
// Ring routes it to (while every shard is up), or "" on other clients.
func (h *Hub) Shard(channel string) string { return h.route.of(channel) }

// Sharded reports whether the hub subscribes with SSUBSCRIBE (on a
// Cluster), so that releases must publish with SPUBLISH.
func (h *Hub) Sharded() bool { return h.sharded }

// Subscribe registers interest in name and waits until Redis has confirmed
// the subscription, so a wake-up published after Subscribe returns is seen;
// after a second without confirmation it returns the Sub anyway. Grants
// addressed to addr (if not empty; unique among the waiters of name) are
// given to this Sub. The caller must Close the Sub.
//
// It never waits for I/O itself, nor for another caller's: on ctx's end it
// closes the Sub and returns ctx.Err() at once. It also fails when the hub
// is closed, on a Ring whose shards changed (SetAddrs), and when the
// connection name needs could not be opened (on a Ring while a shard is
// down) for the waiter that asked for it; one that only shared the
// subscription keeps its Sub, subscribed again by the shard's next
// connection. A waiter whose Subscribe failed can still wait on its timer.
// Errors name no channel (a fair waiter's channel carries its owner
// token), only the Ring shard.
func (h *Hub) Subscribe(ctx context.Context, name, addr string) (*Sub, error) {
	if err := h.refusal(); err != nil {
		return nil, err
	}
	shardName, err := h.route.route(ctx, name)
	if err != nil {
		return nil, connErr("", err)
	}
	if h.route.state() == shard.Changed {
		return nil, errChanged
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errClosed
	}
	ch := h.chans[name]
	if ch == nil {
		ch = &channel{name: name, shard: shardName}
		h.chans[name] = ch
	}
	ch.refs++
	reused := ch.idle // subscribed still: nothing to send
	if reused {
		ch.idle = false
		ch.linger.Stop()
	}
	if ch.conn == nil {
		// Routed afresh: on a Cluster its slot may have moved.
		ch.shard = shardName
	}
	// The first waiter subscribes, unless the channel lingered; so does a
	// later one when the channel's connection failed to open or was
	// dropped.
	opener := ch.refs == 1 && !reused || ch.conn == nil
	if opener {
		h.attachLocked(ch)
	}
	s := h.addSubLocked(ch, addr)
	h.mu.Unlock()

	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-s.wait.done:
		// A waiter that shared a subscription that failed keeps its Sub:
		// the next connection of the shard subscribes its channel again.
		if err := s.wait.err; err != nil && (opener || err == errClosed) {
			s.Close()
			return nil, err
		}
	case <-t.C:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	return s, nil
}

// Join is Subscribe for a channel subscribed already, as Redis confirmed
// (for a waiter of this hub, or lingering after the last one left): it
// sends nothing and never waits. It returns nil when name is not in that
// state (not subscribed, a SUBSCRIBE or UNSUBSCRIBE on its way, a Ring
// whose shards changed, a closed or refused hub): the caller subscribes
// as usual. addr is called, under the hub's lock, only to join: it must
// not call the hub. The caller must Close the Sub.
func (h *Hub) Join(name string, addr func() string) *Sub {
	if h.refusal() != nil || h.route.state() == shard.Changed {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.chans[name]
	if h.closed || ch == nil || ch.conn == nil || ch.wait == nil || ch.pendingSub > 0 || ch.pendingUnsub > 0 ||
		ch.refs == 0 && !ch.idle {
		return nil
	}
	select {
	case <-ch.wait.done:
		if ch.wait.err != nil {
			return nil
		}
	default:
		return nil
	}
	ch.refs++
	if ch.idle {
		ch.idle = false
		ch.linger.Stop()
	}
	return h.addSubLocked(ch, addr())
}

// addSubLocked adds a Sub of ch, for grants addressed to addr.
func (h *Hub) addSubLocked(ch *channel, addr string) *Sub {
	sc := make(chan struct{}, 1)
	s := &Sub{C: sc, c: sc, hub: h, name: ch.name, addr: addr, wait: ch.wait}
	ch.subs = append(ch.subs, s)
	return s
}

// attachLocked subscribes ch on the connection of its shard, opening one
// if there is none: a new connection subscribes every channel of its
// shard that has waiters but no connection (its last one failed to open,
// or was dropped).
func (h *Hub) attachLocked(ch *channel) {
	c := h.conns[ch.shard]
	if c != nil {
		h.subscribeLocked(c, ch)
		return
	}
	c = &conn{shard: ch.shard}
	h.conns[ch.shard] = c
	for _, o := range h.chans {
		if o.shard == ch.shard && o.conn == nil && o.refs > 0 {
			h.subscribeLocked(c, o)
		}
	}
}

// subscribeLocked queues a SUBSCRIBE of ch on c, which new waiters of ch
// wait for.
func (h *Hub) subscribeLocked(c *conn, ch *channel) {
	ch.conn = c
	ch.pendingSub++
	ch.wait = newConfirm()
	h.queueLocked(c, op{name: ch.name, subscribe: true})
}

// Close withdraws the interest. A wake-up it had received but not consumed
// is passed on to another waiter of the same channel. Closing a Sub twice
// does nothing. Close never waits for I/O.
func (s *Sub) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.chans[s.name]
	if ch == nil {
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
		return
	}
	select {
	case <-s.c:
		ch.wakeOne()
	default:
	}
	if ch.refs > 0 || h.closed {
		return
	}
	if ch.conn == nil {
		if ch.pendingSub == 0 && ch.pendingUnsub == 0 {
			delete(h.chans, s.name)
		}
		return
	}
	ch.idle, ch.idleAt = true, time.Now()
	if ch.linger == nil {
		ch.linger = time.AfterFunc(h.linger, func() { h.unlinger(ch) })
	} else {
		ch.linger.Reset(h.linger)
	}
}

// unlinger unsubscribes ch if it is still idle, Linger after its last
// waiter left.
func (h *Hub) unlinger(ch *channel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ch.idle || h.closed || h.chans[ch.name] != ch {
		return
	}
	if left := h.linger - time.Since(ch.idleAt); left > 0 {
		// A run of the timer from an earlier idle spell, which waited
		// for h.mu while the channel was reused and left again.
		ch.linger.Reset(left)
		return
	}
	ch.idle = false
	ch.pendingUnsub++
	h.queueLocked(ch.conn, op{name: ch.name, subscribe: false})
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

// Close closes every connection. Waiters are woken, and Subscribe calls
// still waiting for a confirmation fail. Close waits for the hub's
// goroutines for at most half a second: one stuck in go-redis on an
// unresponsive server (opening a connection, whose handshake go-redis
// bounds by its ReadTimeout and not by a context, or writing, bounded by
// its WriteTimeout) is left to finish by itself, and then closes what it
// opened and exits. With a ReadTimeout of -1 that lasts until the server
// answers or drops the connection, or the go-redis client is closed.
// Close returns the errors of the connections closed within that time.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.cancel()
	for _, ch := range h.chans {
		ch.markReady(errClosed)
		ch.wakeAll()
		if ch.linger != nil {
			ch.linger.Stop()
		}
	}
	for _, c := range h.conns {
		c.queue = nil
		// A connection still opening is closed by its writer (see drain).
		if ps := c.ps; ps != nil {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				// Waits for go-redis's PubSub lock, which a reconnection
				// in progress holds.
				if err := ps.Close(); err != nil {
					h.mu.Lock()
					h.closeErrs = append(h.closeErrs, err)
					h.mu.Unlock()
				}
			}()
		}
	}
	h.mu.Unlock()

	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return errors.Join(h.closeErrs...)
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
		switch {
		case m.Payload == WakeAll:
			ch.wakeAll()
		case strings.HasPrefix(m.Payload, GrantPrefix):
			ch.grant(m.Payload[len(GrantPrefix):])
		default:
			ch.wakeOne()
		}
	case *redis.Subscription:
		ch := h.chans[m.Channel]
		if ch == nil {
			return
		}
		switch m.Kind {
		case "subscribe", "ssubscribe":
			if ch.pendingSub > 0 {
				ch.pendingSub--
			}
			if ch.pendingSub == 0 {
				// Also when nobody waits: a waiter that comes while the
				// channel lingers takes the subscription as it is.
				ch.markReady(nil)
			}
		case "unsubscribe", "sunsubscribe":
			if ch.pendingUnsub > 0 {
				ch.pendingUnsub--
			} else if m.Kind == "sunsubscribe" && ch.pendingSub == 0 {
				// Not asked for: the node gave the channel's slot away.
				// Its waiters try again, then rely on their timers until
				// the channel is routed afresh.
				ch.conn, ch.idle = nil, false
				ch.wakeAll()
				h.rerouteLocked()
			}
		}
		if ch.refs == 0 && !ch.idle && ch.pendingSub == 0 && ch.pendingUnsub == 0 {
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
		ch.markReady(nil)
		ch.wakeAll()
		// go-redis subscribes an idle channel again with the others: it
		// stays, to be unsubscribed when its linger ends.
		if ch.refs == 0 && !ch.idle {
			delete(h.chans, name)
		}
	}
}

// markReady ends the wait for the channel's confirmation, with err if it
// failed. The caller holds Hub.mu.
func (ch *channel) markReady(err error) {
	if ch.wait == nil {
		return
	}
	select {
	case <-ch.wait.done:
	default:
		ch.wait.err = err
		close(ch.wait.done)
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

// grant gives a grant ("<addr>|<data>") to the waiter subscribed with
// addr, and wakes it; a grant for nobody here is dropped (the waiter left,
// and its leaving passed the lock on).
func (ch *channel) grant(msg string) {
	addr, data, ok := strings.Cut(msg, "|")
	if !ok || addr == "" {
		return
	}
	for _, s := range ch.subs {
		if s.addr == addr {
			s.grant = data
			select {
			case s.c <- struct{}{}:
			default:
			}
			return
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

// ErrRefused is what Subscribe returns once Redis has refused a
// subscription: wake-ups cannot be pushed to this client.
var ErrRefused = errors.New("notify: Redis refuses subscriptions (no channel rights?): waiters poll")

// refusal returns why Subscribe cannot work any more, or nil.
func (h *Hub) refusal() error {
	if p := h.refused.Load(); p != nil {
		return *p
	}
	return nil
}

// refuse takes note that Redis refused a subscription with err: every
// waiter stops waiting for a confirmation, later ones do not subscribe,
// and OnRefused is told, once.
func (h *Hub) refuse(err error) {
	rerr := fmt.Errorf("%w (%v)", ErrRefused, err)
	if !h.refused.CompareAndSwap(nil, &rerr) {
		return
	}
	h.mu.Lock()
	for _, ch := range h.chans {
		ch.markReady(rerr)
	}
	h.mu.Unlock()
	if h.OnRefused != nil {
		h.OnRefused(rerr)
	}
}

// isRefusal reports whether err is Redis refusing a subscription rather
// than a broken connection: an ACL denial of the channel or of the
// command, or a server or proxy without the command. A refused PING (a
// user without +ping) is not one: subscriptions work.
func isRefusal(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(err.Error())
	if strings.HasPrefix(msg, "noperm") && strings.Contains(msg, "channel") {
		return true
	}
	return strings.Contains(msg, "subscribe") && (strings.HasPrefix(msg, "noperm") ||
		strings.Contains(msg, "unknown command") || strings.Contains(msg, "not allowed"))
}

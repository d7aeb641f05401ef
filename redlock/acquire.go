package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// call is one acquire call (Lock, TryLock, LockFor or TryLockFor) of a
// handle.
type call struct {
	op     string
	lease  time.Duration // of every part (LockFor, TryLockFor); 0: the handle's (see partLease)
	block  bool          // Lock: refused attempts queue the call on the masters (for wake-ups)
	wait   string        // a blocking call's wait id, in its queue entries
	queued []int8        // per master: 0 not queued, maybeQueued, queued
	tried  bool          // an attempt was made: a blocking call's next ones keep its queue entries (the script)
	tries  int           // attempts made (for events)
}

// Whether a blocking call is queued on a master.
const (
	maybeQueued = 1 // its latest attempt there has no known outcome
	queued      = 2 // its latest attempt there was refused
)

// result is what a refused attempt learned.
type result struct {
	ok    bool
	retry time.Duration // how long until a holder's key expires on some master (< 0: unknown)
	split bool          // no other owner was seen on a majority: contenders split the masters
	some  bool          // some masters granted it (and were given back): the lock was free there
	took  time.Duration
}

// attempt asks every usable master, in parallel, to take the lock for
// this owner, and decides as soon as the replies allow: granted by a
// majority, or refused by so many that no majority is left. Masters that
// have not answered within m.timeout count as not answering. A failed
// attempt (and one whose ctx ended) aborts the request on every master
// that granted it or did not answer; a successful one becomes the
// handle's hold, which later grants of masters that answered late join.
func (m *Mutex) attempt(ctx context.Context, c *call) (result, error) {
	c.tries++
	m.mu.Lock()
	defer m.mu.Unlock()
	// A renewal of the last hold on its way to a master could reach the
	// new hold there (its owner check knows only the token) and give it
	// that master's watchdog lease: wait for it (watchdog.Settle), without
	// m.mu, and check again.
	for m.cur == nil {
		part, wd := m.flying()
		if part == nil {
			break
		}
		m.mu.Unlock()
		err := wd.Settle(ctx, part)
		m.mu.Lock()
		if err != nil {
			return result{}, m.errorf(c.op, lockerr.GaveUp(err)) // ctx's error
		}
	}
	if h := m.cur; h != nil {
		if err := h.Err(); err != nil {
			return result{}, m.errorf(c.op, fmt.Errorf("%w; unlock it before locking again", err))
		}
		return result{}, m.errorf(c.op, lockerr.AlreadyHeld)
	}
	if err := lockerr.CtxGaveUp(ctx); err != nil {
		return result{}, m.errorf(c.op, err)
	}
	idx, errs := m.usable()
	idx, berrs := m.unstuck(idx)
	errs = append(errs, berrs...)
	n := len(m.owners)
	if len(idx) < m.quorum {
		return result{}, m.errorf(c.op, &quorumError{lock: c.block, errs: errs,
			detail: fmt.Sprintf("%d of %d masters could be asked, %d needed", len(idx), n, m.quorum)})
	}
	id := m.nextID()
	block := 0
	if c.block {
		block = 1
	}
	// The hold's validity, and how long the attempt waits for replies.
	valid := m.lease
	if c.lease > 0 {
		valid = c.lease
	}
	timeout := attemptTimeout(valid)
	// As the mutex does, a call's first attempt (and every TryLock
	// attempt) starts with a native SET NX PX: one cheap command where the
	// lock is free; the script only where it is not (it also recognises a
	// resent SET of this owner that had succeeded, and queues a Lock).
	fast := !c.block || !c.tried
	c.tried = true
	start := time.Now()
	// Each master's part gets the call's lease, or else its own owner's
	// (see New).
	rd := m.send(ctx, idx, timeout, func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
		lease := m.partLease(i, c.lease)
		if fast {
			ok, err := o.SetNX(ctx, lease)
			if err != nil {
				return nil, err
			}
			if ok {
				return []int64{1, 0}, nil
			}
		}
		wait := strconv.Itoa(block) + "|" + strconv.FormatInt(m.hbMS, 10) + "|" + c.wait + "|" +
			strconv.FormatInt(m.claim(i, c).Milliseconds(), 10) + "|" + strconv.FormatInt(recordTTL(lease), 10)
		return o.Run(ctx, scripts.MutexAcquire, m.kkeys, m.token, lease.Milliseconds(), id, 0, 0, wait,
			o.Cfg.Metadata, noHandoff).Int64Slice()
	})
	fresh := 0 // masters asked whose lane was free
	for _, i := range idx {
		if !rd.backlog[i] {
			fresh++
		}
	}
	got, gaveUp := rd.collect(ctx, len(idx), timeout, func(got []reply) (bool, bool) {
		g, f, ok := 0, 0, 0
		for _, r := range got {
			if granted(r) {
				g++
			}
			if !rd.backlog[r.i] {
				f++
			}
			if r.err == nil {
				ok++
			}
		}
		if g >= m.quorum {
			return true, true // and the others, if they are about as fast
		}
		if g+len(idx)-len(got) < m.quorum {
			return true, false
		}
		// Every master with a free lane answered, a majority of them
		// without error, and that did not decide it; the rest are still
		// busy with an earlier request of the handle (unreachable, or
		// slow): wait for them as long again, not for the whole timeout.
		// Typically an attempt that a push woke while the release was
		// still on its way to some masters: it will be split, and retried
		// after a backoff. (A majority answered: this never turns into
		// ErrNoQuorum.)
		return f == fresh && ok >= m.quorum, true
	})
	took := time.Since(start)

	state := make([]int, n) // stNone: not asked
	for _, i := range idx {
		state[i] = stUnknown
	}
	g, r := 0, 0
	retry := core.Unknown
	for _, rep := range got {
		switch {
		case rep.err != nil:
			errs = append(errs, m.masterErr(rep.i, rep.err))
		case granted(rep):
			state[rep.i] = stHeld
			g++
		case len(rep.val) >= 2:
			state[rep.i] = stRefused
			r++
			if ttl := time.Duration(rep.val[1]) * time.Millisecond; ttl >= 0 && (retry < 0 || ttl < retry) {
				retry = ttl
			}
		default:
			errs = append(errs, m.masterErr(rep.i, fmt.Errorf("unexpected reply %v", rep.val)))
		}
	}
	if c.block {
		for i, s := range state {
			switch s {
			case stRefused:
				c.queued[i] = queued
			case stUnknown:
				c.queued[i] = max(c.queued[i], maybeQueued)
			case stHeld:
				c.queued[i] = 0 // a grant takes the caller out of that queue
			}
		}
	}

	// Valid while every part of a majority is: within the smallest lease.
	inTime := time.Now().Before(start.Add(valid - watchdog.Drift(valid)))
	if g >= m.quorum && inTime && !gaveUp && ctx.Err() == nil {
		leases := make([]time.Duration, n)
		for i := range leases {
			leases[i] = m.partLease(i, c.lease)
		}
		h := m.newHold(start, id, state, c.lease, c.lease == 0 && m.owners[0].Watched(), false, leases)
		m.cur = h
		m.last.Store(h)
		rd.setLate(h.late)
		return result{ok: true}, nil
	}

	// Not acquired: give back at once what it took (and what it may have
	// taken: the masters that did not answer).
	m.abortAll(ctx, id, state, c.lease)
	if gaveUp || ctx.Err() != nil {
		return result{}, m.errorf(c.op, lockerr.GaveUp(ctx.Err()))
	}
	// Unreachable: closed, busy, failed, or silent until the timeout (not
	// merely unanswered when refusals had already decided the attempt).
	unreachable := len(errs)
	if open := len(idx) - len(got); g+open >= m.quorum {
		replied := make([]bool, n)
		for _, rep := range got {
			replied[rep.i] = true
		}
		for _, i := range idx {
			if !replied[i] {
				errs = append(errs, m.masterErr(i, errNoReply(took.Round(time.Millisecond))))
			}
		}
		unreachable = len(errs)
	}
	switch {
	case n-unreachable < m.quorum:
		return result{}, m.errorf(c.op, &quorumError{lock: c.block, errs: errs,
			detail: fmt.Sprintf("%d of %d masters could be asked or answered, %d needed", n-unreachable, n, m.quorum)})
	case g >= m.quorum:
		return result{}, m.errorf(c.op, &quorumError{lock: c.block, errs: errs,
			detail: fmt.Sprintf("granted by %d of %d masters, but only after its validity time (the attempt took %v; lease %v)",
				g, n, took.Round(time.Microsecond), valid)})
	}
	return result{retry: retry, split: r < m.quorum, some: g > 0, took: took}, nil
}

func granted(r reply) bool { return r.err == nil && len(r.val) >= 2 && r.val[0] == 1 }

// abortAll aborts request id, an acquire of parts with lease (0: the
// handle's), on every master whose state says it granted it or may have:
// on a master that has the key it is deleted, and everywhere a late copy
// of the request is refused. It waits (at most m.timeout) for the masters
// that granted it, then for the others as long again: a master that did
// not answer the acquire either is likely down. The caller holds m.mu.
func (m *Mutex) abortAll(ctx context.Context, id string, state []int, lease time.Duration) {
	var idx []int
	must := 0
	for i, s := range state {
		switch s {
		case stHeld:
			must++
			idx = append(idx, i)
		case stUnknown:
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	// Not bounded by ctx (it may have ended): each abort is bounded by
	// the timeout, and those not waited for still run after return.
	cctx := context.WithoutCancel(ctx)
	rd := m.send(cctx, idx, m.timeout, func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
		n, err := m.abort(ctx, o, id, recordTTL(m.partLease(i, lease)))
		return []int64{n}, err
	})
	rd.collect(cctx, len(idx), m.timeout, func(got []reply) (bool, bool) {
		k := 0
		for _, r := range got {
			if state[r.i] == stHeld {
				k++
			}
		}
		return k == must, true
	})
}

// leave takes the call out of the queues of the masters where it may be
// queued: after a success in the background (nothing to wait for: an
// entry left behind expires within a heartbeat), after a failure before
// Lock returns (waiting at most m.timeout, and only for the masters where
// it is surely queued).
func (m *Mutex) leave(c *call, success bool) {
	var idx []int
	must := 0
	for i, q := range c.queued {
		if q != 0 {
			idx = append(idx, i)
		}
		if q == queued {
			must++
		}
	}
	if len(idx) == 0 {
		return
	}
	f := func(count int) func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
		return func(ctx context.Context, i int, o *core.Owner) ([]int64, error) {
			// With count 0, the script also deletes a key of this owner
			// (a late grant of an attempt that failed).
			return nil, o.Run(ctx, scripts.MutexLeave, m.kkeys, m.token, c.wait, count,
				m.claim(i, c).Milliseconds(), 0, o.Cfg.Metadata, noHandoff).Err()
		}
	}
	if success {
		m.send(context.Background(), idx, m.timeout, f(1))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	count := 0
	if m.cur != nil {
		count = 1 // another call of the handle holds the lock: keep its key
	}
	ctx := context.Background()
	m.send(ctx, idx, m.timeout, f(count)).collect(ctx, len(idx), m.timeout, func(got []reply) (bool, bool) {
		k := 0
		for _, r := range got {
			if c.queued[r.i] == queued {
				k++
			}
		}
		return k == must, true
	})
}

// claim is the claim lease in call c's queue entry on master i (never
// used: a redlock grants nothing; the leave of the entry must name it as
// the acquire did).
func (m *Mutex) claim(i int, c *call) time.Duration {
	return min(m.partLease(i, c.lease), m.owners[i].Claim())
}

// lock is Lock (or LockFor, with lease > 0) after the argument checks.
func (m *Mutex) lock(ctx context.Context, lease time.Duration) (err error) {
	begin := time.Now()
	c := &call{op: "lock", lease: lease, block: true, wait: newWaitID(), queued: make([]int8, len(m.owners))}
	defer func() { m.failed(ctx, err, c, begin) }()
	var w *wakeups
	defer func() { w.close() }()
	splits := 0
	for {
		res, err := m.attempt(ctx, c)
		if err != nil {
			m.leave(c, false)
			return err
		}
		if res.ok {
			m.leave(c, true)
			m.acquired(ctx, c, begin)
			return nil
		}
		if w == nil {
			w = m.subscribe(ctx)
			if !res.split {
				// Subscribed now: try again before waiting, so that a
				// release since the attempt is not missed.
				continue
			}
		}
		var d time.Duration
		var wake <-chan struct{}
		if res.split {
			// Nobody holds a majority: contenders split the masters and
			// gave back what they took. Retrying at once would split
			// them again; a random delay breaks the step (Redlock).
			splits++
			d = backoff(splits, res.took)
		} else {
			splits = 0
			d = core.WaitFor(res.retry, m.maxWait())
			wake = w.C
		}
		if err := sleep(ctx, wake, d); err != nil {
			m.leave(c, false)
			return m.errorf("lock", err)
		}
	}
}

// maxWait caps a timed wait: pushes are lost only when a subscription
// breaks, and each attempt also refreshes the call's queue entries, which
// live a heartbeat. A Client made with relock.WithPolling caps it at its
// interval.
func (m *Mutex) maxWait() time.Duration {
	d := min(time.Duration(m.hbMS)*time.Millisecond/4, core.MaxWait)
	for i := range m.owners {
		if p := m.owners[i].E.Polling(); p > 0 {
			d = min(d, p)
		}
	}
	return d
}

// maxTrySplits is how many times TryLock tries again after contenders
// may have split the masters.
const maxTrySplits = 3

// backoff is the random delay after the splits-th split attempt in a
// row: up to twice the attempt's time plus a millisecond, doubling with
// each split, at most 200 ms.
func backoff(splits int, took time.Duration) time.Duration {
	limit := min((2*took+time.Millisecond)<<min(splits-1, 8), 200*time.Millisecond)
	return rand.N(limit) + 1
}

// sleep waits for d, a wake-up, or ctx's end (then it returns an error
// matching relock.ErrNotObtained and ctx.Err()).
func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-ctx.Done():
		return lockerr.GaveUp(ctx.Err())
	}
	return nil
}

// wakeups are a waiting Lock's subscriptions to the lock's channel on
// every usable master (a release publishes on each master it was held
// on), merged into C. A master's Client closing also wakes the waiter.
type wakeups struct {
	C      chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// subscribe subscribes on every usable master's hub (except those of
// Clients made with relock.WithPolling), one goroutine each, and returns
// once a majority confirmed (or all answered), at most after m.timeout: a
// master that is down or slow does not hold the waiter up, whose timers
// cover what a missing subscription misses.
func (m *Mutex) subscribe(ctx context.Context) *wakeups {
	var idx []int
	usable, _ := m.usable()
	for _, i := range usable {
		if m.owners[i].E.Polling() == 0 {
			idx = append(idx, i)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	w := &wakeups{C: make(chan struct{}, 1), cancel: cancel}
	ready := make(chan bool, len(idx))
	for _, i := range idx {
		e := m.owners[i].E
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			sub, err := e.Hub.Subscribe(sctx, m.keys.Channel, "")
			ready <- err == nil
			if err != nil {
				return
			}
			defer sub.Close()
			for {
				select {
				case <-sub.C:
					w.wake()
				case <-e.Closed():
					w.wake()
					return
				case <-sctx.Done():
					return
				}
			}
		}()
	}
	t := time.NewTimer(m.timeout)
	defer t.Stop()
	confirmed := 0
	for range idx {
		select {
		case ok := <-ready:
			if ok {
				confirmed++
			}
		case <-t.C:
			return w
		case <-ctx.Done():
			return w
		}
		if confirmed >= m.quorum {
			break
		}
	}
	return w
}

func (w *wakeups) wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// close ends the subscriptions and their goroutines.
func (w *wakeups) close() {
	if w == nil {
		return
	}
	w.cancel()
	w.wg.Wait()
}

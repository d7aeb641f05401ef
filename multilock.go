package relock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
)

// Locker is an exclusive lock handle, as MultiLock takes it: a
// *mutex.Mutex, *reentrant.Lock, *fair.Lock, or *rwlock.RWMutex (through
// its write lock: Lock, TryLock, Unlock). Kind and Name identify the lock
// (Kind is the lock type's name, as in Event.Kind); two handles with the
// same kind and name are handles on the same lock.
type Locker interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context) (bool, error)
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
	Kind() string
	Name() string
}

// Multi is several locks taken and released as one (Redisson's
// RedissonMultiLock): all or none. Make it with MultiLock.
//
// Its parts are always acquired in one canonical order, sorted by kind
// and then name, whatever the order they were given in, so two Multis
// over overlapping sets of locks never deadlock each other (nor with code
// that takes the same locks in that order). Unlock releases them side by
// side (the order of releases cannot deadlock anybody): every part's
// renewals stop when it is called, and it takes as long as its slowest
// part. A Multi holds what its parts hold: it is reentrant if
// all of its parts are (a second Lock of a Multi with a mutex part fails
// with ErrAlreadyHeld and gives back what it took). Its parts' handles
// must not be locked or unlocked on their own while the Multi holds them.
//
// A Multi is safe for concurrent use and must not be copied. Its methods
// start no goroutine that outlives them, except Lost (see there); Unlock
// releases the parts from goroutines of its own, and waits for them (a
// part's panic goes on in Unlock's caller).
type Multi struct {
	locks []Locker // in canonical order
	err   error    // invalid arguments, reported by every call

	mu   sync.Mutex
	held []int  // holds of each part taken through the Multi, not yet given back
	owed []bool // parts whose give-back (after a failed Lock) had an unknown outcome
	hold *multiHold
}

// multiHold is one hold of a Multi, from the Lock that took its parts to
// the Unlock that gave the last of them back.
type multiHold struct {
	parts    []<-chan struct{} // the parts' Lost channels
	lost     chan struct{}     // closed when a part is lost
	done     chan struct{}     // closed when the hold ends
	watching bool              // a goroutine watches parts (see Lost)
	ended    bool
}

// MultiLock returns the Multi of locks. It never fails: no lock, a nil
// lock, or the same lock twice (the same kind and name, which could only
// deadlock) is reported by every call as an error matching
// ErrInvalidOption, before any lock is touched.
func MultiLock(locks ...Locker) *Multi {
	m := &Multi{locks: append([]Locker(nil), locks...)}
	if len(locks) == 0 {
		m.err = fmt.Errorf("%w: no lock", lockerr.InvalidOption)
		return m
	}
	for i, l := range locks {
		if v := reflect.ValueOf(l); l == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
			m.err = fmt.Errorf("%w: lock %d is nil", lockerr.InvalidOption, i)
			return m
		}
	}
	sort.SliceStable(m.locks, func(i, j int) bool {
		a, b := m.locks[i], m.locks[j]
		if a.Kind() != b.Kind() {
			return a.Kind() < b.Kind()
		}
		return a.Name() < b.Name()
	})
	for i := 1; i < len(m.locks); i++ {
		if a, b := m.locks[i-1], m.locks[i]; a.Kind() == b.Kind() && a.Name() == b.Name() {
			m.err = fmt.Errorf("%w: %s %q given twice", lockerr.InvalidOption, a.Kind(), a.Name())
			return m
		}
	}
	m.held = make([]int, len(m.locks))
	m.owed = make([]bool, len(m.locks))
	return m
}

// Lock acquires every part, in canonical order, each waiting as its Lock
// does, until all are held or ctx ends. If a part fails (ctx ended: the
// error matches ErrNotObtained and ctx.Err(), like Lock; or any other
// error of the part, which it wraps), the parts taken by this call are
// released, in reverse order, before Lock returns.
func (m *Multi) Lock(ctx context.Context) error { return m.lock(ctx, 0, false) }

// LockFor is Lock with LockFor's lease for every part (see
// mutex.Mutex.LockFor): each part must have a LockFor method (relock's
// lock types do), or every call returns an error matching
// ErrInvalidOption.
func (m *Multi) LockFor(ctx context.Context, lease time.Duration) error {
	return m.lock(ctx, lease, true)
}

func (m *Multi) lock(ctx context.Context, lease time.Duration, fixed bool) error {
	if err := m.check(lease, fixed); err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	if err := m.settle(ctx, true); err != nil {
		return fmt.Errorf("multilock: lock: %w", err)
	}
	for i, l := range m.locks {
		var err error
		if fixed {
			err = l.(leaser).LockFor(ctx, lease)
		} else {
			err = l.Lock(ctx)
		}
		if err != nil {
			return m.giveBack(ctx, i, fmt.Errorf("multilock: lock: %w", err))
		}
	}
	m.took()
	return nil
}

// leaser is a Locker with per-hold leases and Extend, as relock's lock
// types are.
type leaser interface {
	LockFor(ctx context.Context, lease time.Duration) error
	TryLockFor(ctx context.Context, lease time.Duration) (bool, error)
}

// extender is a Locker whose hold can be extended.
type extender interface {
	Extend(ctx context.Context, d time.Duration) error
}

// check returns why a call with lease cannot be made: the Multi's
// arguments, or with fixed (LockFor), the lease or a part without
// LockFor.
func (m *Multi) check(lease time.Duration, fixed bool) error {
	if m.err != nil || !fixed {
		return m.err
	}
	if err := core.CheckLease("lease", lease); err != nil {
		return err
	}
	for _, l := range m.locks {
		if _, ok := l.(leaser); !ok {
			return fmt.Errorf("%w: %s %q has no LockFor", lockerr.InvalidOption, l.Kind(), l.Name())
		}
	}
	return nil
}

// TryLock makes one attempt at each part, in canonical order: (true,
// nil) if it took them all; (false, nil) if one is held elsewhere, or
// (false, err) if one failed, after releasing, in reverse order, the
// parts it took.
func (m *Multi) TryLock(ctx context.Context) (bool, error) { return m.tryLock(ctx, 0, false) }

// TryLockFor is TryLock with LockFor's lease.
func (m *Multi) TryLockFor(ctx context.Context, lease time.Duration) (bool, error) {
	return m.tryLock(ctx, lease, true)
}

func (m *Multi) tryLock(ctx context.Context, lease time.Duration, fixed bool) (bool, error) {
	if err := m.check(lease, fixed); err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	if err := m.settle(ctx, true); err != nil {
		return false, fmt.Errorf("multilock: trylock: %w", err)
	}
	for i, l := range m.locks {
		var ok bool
		var err error
		if fixed {
			ok, err = l.(leaser).TryLockFor(ctx, lease)
		} else {
			ok, err = l.TryLock(ctx)
		}
		if err != nil {
			return false, m.giveBack(ctx, i, fmt.Errorf("multilock: trylock: %w", err))
		}
		if !ok {
			return false, m.giveBack(ctx, i, nil)
		}
	}
	m.took()
	return true, nil
}

// Unlock releases every part, side by side, even when some fail; the
// error joins the parts' errors (each matching what that part's Unlock
// returned: ErrNotHeld for a part that was lost, say). Without a
// hold it returns an error matching ErrNotHeld. A part whose Unlock
// failed with an unknown outcome (a network error) stays held by the
// Multi: calling Unlock again repeats only that part's request, and so
// does a Lock or TryLock before it takes anything.
//
// It is not cancelled by ctx: every part's release is sent at once, side
// by side, and its reply awaited as that part's Unlock does (up to 5 s for
// relock's lock types), even when ctx has ended; every part's renewals
// stop when Unlock is called.
func (m *Multi) Unlock(ctx context.Context) error {
	if m.err != nil {
		return fmt.Errorf("multilock: unlock: %w", m.err)
	}
	if err := m.settle(ctx, false); err != nil {
		return fmt.Errorf("multilock: unlock: %w", err)
	}
	m.mu.Lock()
	top := 0
	for _, n := range m.held {
		top = max(top, n)
	}
	if top == 0 {
		m.mu.Unlock()
		return fmt.Errorf("multilock: unlock: %w", lockerr.NotHeld)
	}
	// The parts at the top count: all of them, unless an earlier Unlock
	// failed for some. They are counted as given back now, so that a
	// concurrent Unlock does not give them back twice.
	var order []int
	for i := len(m.locks) - 1; i >= 0; i-- {
		if m.held[i] == top {
			m.held[i]--
			order = append(order, i)
		}
	}
	m.mu.Unlock()

	// Side by side: every part's renewals stop now, and the Unlock takes
	// as long as its slowest part, not their sum (Redis unreachable).
	results := make([]error, len(order))
	panics := make([]any, len(order))
	var wg sync.WaitGroup
	for j, i := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panics[j] = recover() }()
			results[j] = m.locks[i].Unlock(ctx)
		}()
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p) // a part of another package panicked: in the caller, as before
		}
	}
	var errs []error
	for j, i := range order {
		err := results[j]
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if !errors.Is(err, lockerr.NotHeld) {
			// Unknown outcome: still held, as far as the Multi knows.
			m.mu.Lock()
			m.held[i]++
			m.mu.Unlock()
		}
	}
	m.mu.Lock()
	m.endIfFree()
	m.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("multilock: unlock: %w", errors.Join(errs...))
	}
	return nil
}

// Lost returns a channel that is closed when any part of the Multi's
// current hold is lost (its own Lost channel fires). A hold that ends by
// Unlock is not lost, and its channel stays open. Before the first
// successful Lock it returns nil: a receive from it blocks forever (nothing
// held can be lost).
//
// The first call during a hold starts one goroutine that watches the
// parts; it exits when a part is lost or the hold ends (the Unlock that
// gives the last part back). Without a call to Lost, no goroutine runs.
func (m *Multi) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hold
	if h == nil {
		return nil
	}
	if !h.watching && !h.ended {
		h.watching = true
		go h.watch()
	}
	return h.lost
}

// Kind returns "multilock" (see Locker: a Multi is a Locker, for Do).
func (m *Multi) Kind() string { return "multilock" }

// Name returns the kinds and names of the parts in canonical order,
// "mutex:a,reentrant:b".
func (m *Multi) Name() string {
	var b strings.Builder
	for _, l := range m.locks {
		if isNilLocker(l) {
			continue // refused by MultiLock: reported by every call
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Kind() + ":" + l.Name())
	}
	return b.String()
}

var _ Locker = (*Multi)(nil)

// LostErr returns why the Multi's most recent hold was lost (the loss of
// the first part, in canonical order, that was lost: an error matching
// ErrNotHeld and its reason), or nil if it was not lost.
func (m *Multi) LostErr() error {
	m.mu.Lock()
	h := m.hold
	m.mu.Unlock()
	if h == nil {
		return nil
	}
	for _, l := range m.locks {
		select {
		case <-l.Lost():
			return lossOf(l)
		default:
		}
	}
	return nil
}

// Extend sets the remaining lease of every part's hold to d, as each
// part's Extend does (see mutex.Mutex.Extend), in canonical order, even
// when some fail; the error joins the parts' errors (ErrNotHeld for a
// part that was lost, say). Each part must have an Extend method
// (relock's lock types do), or Extend returns an error matching
// ErrInvalidOption and extends nothing.
func (m *Multi) Extend(ctx context.Context, d time.Duration) error {
	if m.err != nil {
		return fmt.Errorf("multilock: extend: %w", m.err)
	}
	for _, l := range m.locks {
		if _, ok := l.(extender); !ok {
			return fmt.Errorf("multilock: extend: %w: %s %q has no Extend", lockerr.InvalidOption, l.Kind(), l.Name())
		}
	}
	m.mu.Lock()
	held := m.hold != nil && !m.hold.ended
	m.mu.Unlock()
	if !held {
		return fmt.Errorf("multilock: extend: %w", lockerr.NotHeld)
	}
	var errs []error
	for _, l := range m.locks {
		if err := l.(extender).Extend(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("multilock: extend: %w", errors.Join(errs...))
	}
	return nil
}

// HoldContext returns a context derived from ctx that is cancelled when
// the Multi's current hold ends: when a part is lost (cause: that part's
// loss), or when Unlock releases the parts (cause context.Canceled). When
// the Multi holds nothing it is cancelled already (cause: an error
// matching ErrNotHeld). It starts no goroutine for parts of relock's lock
// types (one per part of another package, which it watches through its
// Lost channel until the hold ends).
func (m *Multi) HoldContext(ctx context.Context) context.Context {
	m.mu.Lock()
	h := m.hold
	m.mu.Unlock()
	if m.err != nil || h == nil {
		return core.Ended(ctx, lockerr.NotHeld)
	}
	for _, l := range m.locks {
		if hc, ok := l.(holdContexter); ok {
			ctx = hc.HoldContext(ctx)
			continue
		}
		pctx, cancel := context.WithCancelCause(ctx)
		go func(l Locker) {
			select {
			case <-l.Lost():
				cancel(lossOf(l))
			case <-h.done:
				cancel(context.Canceled)
			case <-pctx.Done():
			}
		}(l)
		ctx = pctx
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h.ended {
		return core.Ended(ctx, context.Canceled)
	}
	return ctx
}

// watch closes h.lost when a part is lost, or returns when h ends.
func (h *multiHold) watch() {
	cases := make([]reflect.SelectCase, 0, len(h.parts)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.done)})
	for _, c := range h.parts {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	if i, _, _ := reflect.Select(cases); i > 0 {
		close(h.lost)
	}
}

// took counts a successful Lock or TryLock of every part.
func (m *Multi) took() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hold == nil || m.hold.ended {
		h := &multiHold{lost: make(chan struct{}), done: make(chan struct{})}
		for _, l := range m.locks {
			if c := l.Lost(); c != nil {
				h.parts = append(h.parts, c)
			}
		}
		m.hold = h
	}
	for i := range m.held {
		m.held[i]++
	}
}

// endIfFree ends the current hold once no part is held. The caller holds
// m.mu.
func (m *Multi) endIfFree() {
	for _, n := range m.held {
		if n > 0 {
			return
		}
	}
	if h := m.hold; h != nil && !h.ended {
		h.ended = true
		close(h.done)
	}
}

// giveBack releases, in reverse order, the first n parts, taken by a Lock
// or TryLock that then failed with err (nil: a TryLock that found a part
// held), and returns err. It does so even though ctx may have ended. A
// part whose release has an unknown outcome (a network error) is owed:
// the Multi's next call repeats that release before anything else.
func (m *Multi) giveBack(ctx context.Context, n int, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	var errs []error
	for i := n - 1; i >= 0; i-- {
		if uerr := m.locks[i].Unlock(cctx); uerr != nil && !errors.Is(uerr, lockerr.NotHeld) {
			m.mu.Lock()
			m.owed[i] = true
			m.mu.Unlock()
			errs = append(errs, uerr)
		}
	}
	if len(errs) > 0 {
		if err == nil {
			err = errors.New("multilock: trylock: a part is held elsewhere")
		}
		return fmt.Errorf("%w (and giving back the locks taken failed; the next call repeats it: %w)", err, errors.Join(errs...))
	}
	return err
}

// giveBackTimeout bounds the release of parts taken by a failed Lock.
const giveBackTimeout = 5 * time.Second

// settle repeats the releases that giveBack could not confirm and, with
// unlocks (before a Lock or TryLock), those of an Unlock that failed for
// some parts only (they count one hold more than the others); it returns
// an error if one still cannot be confirmed, and the caller then sends
// nothing else (a part's next request would otherwise be mistaken for
// the repeat, or the repeat release a new hold).
func (m *Multi) settle(ctx context.Context, unlocks bool) error {
	m.mu.Lock()
	var owed []int
	for i, o := range m.owed {
		if o {
			owed = append(owed, i)
		}
	}
	m.mu.Unlock()
	for j := len(owed) - 1; j >= 0; j-- {
		i := owed[j]
		if err := m.locks[i].Unlock(ctx); err != nil && !errors.Is(err, lockerr.NotHeld) {
			return fmt.Errorf("a release owed since a failed lock: %w", err)
		}
		m.mu.Lock()
		m.owed[i] = false
		m.mu.Unlock()
	}
	for unlocks {
		m.mu.Lock()
		i := m.outstanding()
		if i < 0 {
			m.endIfFree()
			m.mu.Unlock()
			return nil
		}
		m.held[i]--
		m.mu.Unlock()
		if err := m.locks[i].Unlock(ctx); err != nil && !errors.Is(err, lockerr.NotHeld) {
			m.mu.Lock()
			m.held[i]++
			m.mu.Unlock()
			return fmt.Errorf("a release owed since a failed unlock: %w", err)
		}
	}
	return nil
}

// outstanding returns the last part, in canonical order, that counts more
// holds than another part (its release in an Unlock failed), or -1. The
// caller holds m.mu.
func (m *Multi) outstanding() int {
	low, top := m.held[0], m.held[0]
	for _, n := range m.held {
		low, top = min(low, n), max(top, n)
	}
	if low == top {
		return -1
	}
	for i := len(m.held) - 1; ; i-- {
		if m.held[i] == top {
			return i
		}
	}
}

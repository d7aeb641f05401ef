package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// workerEnv carries a worker's spec (JSON) to the re-executed test binary.
const workerEnv = "RELOCK_CHAOS_WORKER"

// spec is what a worker process does.
type spec struct {
	ID        string        // worker id, "w3"
	Addr      string        // Redis, through the worker's own proxy
	Kind      string        // mutex, reentrant, fair, rwlock, semaphore
	Names     []string      // the locks it takes, at random
	Fenced    int           // the first Fenced names use relock.WithFencing
	Lease     time.Duration // fixed lease (relock.WithLease); 0: the watchdog
	Watchdog  time.Duration // the Client's watchdog timeout
	Heartbeat time.Duration // relock.WithHeartbeat
	Capacity  int           // semaphore permits
	Owners    int           // goroutines, each with handles of its own
	Broken    bool          // negative control: enter without taking the lock
	Timeout   time.Duration // go-redis read/write/dial timeout
}

// Critical sections and pauses between them.
const (
	minSection = time.Millisecond
	maxSection = 20 * time.Millisecond
	longEvery  = 20 // one section in longEvery is long
	minLong    = 100 * time.Millisecond
	maxLong    = 250 * time.Millisecond
	maxThink   = 5 * time.Millisecond
	lockWait   = 5 * time.Second // a Lock call gives up after this
)

// selfPause is how long a worker must have gone without its ticker running
// to report itself paused.
const selfPause = 50 * time.Millisecond

// runWorker is the worker process: it takes locks in a loop and reports
// every critical section on stdout until SIGTERM.
func runWorker(js string) int {
	var sp spec
	if err := json.Unmarshal([]byte(js), &sp); err != nil {
		fmt.Fprintln(os.Stderr, "bad worker spec:", err)
		return 2
	}
	out := &reporter{}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	rdb := redis.NewClient(&redis.Options{Addr: sp.Addr, ReadTimeout: sp.Timeout,
		WriteTimeout: sp.Timeout, DialTimeout: sp.Timeout})
	c := relock.New(rdb, relock.WithWatchdogTimeout(sp.Watchdog))
	go watchPauses(ctx, sp.ID, out)
	out.printf("R %s", sp.ID)

	var wg sync.WaitGroup
	for i := 0; i < sp.Owners; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newOwner(sp, i, c, out).run(ctx)
		}()
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // the test kills what is left
	}
	_ = c.Close()
	_ = rdb.Close()
	out.printf("B %s", sp.ID)
	return 0
}

// reporter writes the lines of a worker, one write each.
type reporter struct{ mu sync.Mutex }

func (r *reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func now() int64 { return time.Now().UnixNano() }

// watchPauses reports every span of selfPause or more in which the
// worker's ticker did not run: the process was stopped or starved.
func watchPauses(ctx context.Context, id string, out *reporter) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := time.Now()
		if n.Sub(last) >= selfPause {
			out.printf("P %s %d %d", id, last.UnixNano(), n.UnixNano())
		}
		last = n
	}
}

// handle is one lock handle as a worker uses it, whatever its type.
type handle interface {
	acquire(ctx context.Context, mode byte, n int) error
	release(ctx context.Context, mode byte, n int) error
	lost() <-chan struct{}
	lostErr() error
	fence() int64
	// reenter locks again inside the section, waiting no longer than ctx,
	// and unlocks that again (reentrant types only; others return nil at
	// once).
	reenter(ctx context.Context) error
}

// owner is one goroutine of a worker, with a handle per lock name.
type owner struct {
	sp      spec
	id      string
	out     *reporter
	handles []handle
	debts   []*debt // per handle: an unlock whose outcome stayed unknown
	rnd     *rand.Rand
	seq     int
}

// debt is an unlock a handle still owes: its outcome stayed unknown (the
// network was down longer than the worker retried), so the handle still
// counts the hold, and refuses new acquires once it is lost, until
// unlocked (see "When a hold is lost" in package relock).
type debt struct {
	id   string
	mode byte
	n    int
}

func newOwner(sp spec, i int, c *relock.Client, out *reporter) *owner {
	o := &owner{sp: sp, id: fmt.Sprintf("%s.%d", sp.ID, i), out: out,
		rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))}
	for j, name := range sp.Names {
		var opts []relock.LockOption
		if sp.Lease > 0 {
			opts = append(opts, relock.WithLease(sp.Lease))
		}
		if sp.Heartbeat > 0 {
			opts = append(opts, relock.WithHeartbeat(sp.Heartbeat))
		}
		if j < sp.Fenced {
			opts = append(opts, relock.WithFencing())
		}
		o.handles = append(o.handles, makeHandle(sp, c, name, opts))
		o.debts = append(o.debts, nil)
	}
	return o
}

func makeHandle(sp spec, c *relock.Client, name string, opts []relock.LockOption) handle {
	if sp.Broken {
		return broken{}
	}
	switch sp.Kind {
	case "mutex":
		return exclusiveHandle{mutex.New(c, name, opts...), nil}
	case "reentrant":
		l := reentrant.New(c, name, opts...)
		return exclusiveHandle{l, l}
	case "fair":
		l := fair.New(c, name, opts...)
		return exclusiveHandle{l, l}
	case "rwlock":
		return rwHandle{rwlock.New(c, name, opts...)}
	case "semaphore":
		return semHandle{semaphore.New(c, name, sp.Capacity, opts...)}
	}
	panic("unknown kind " + sp.Kind)
}

// run takes locks until ctx ends.
func (o *owner) run(ctx context.Context) {
	for ctx.Err() == nil {
		o.once(ctx)
		sleep(ctx, time.Duration(o.rnd.Int64N(int64(maxThink))))
	}
}

// once is one acquisition: acquire, enter, work, leave, release.
func (o *owner) once(ctx context.Context) {
	i := o.rnd.IntN(len(o.sp.Names))
	name, h := o.sp.Names[i], o.handles[i]
	mode, n := byte(exclusive), 1
	switch o.sp.Kind {
	case "rwlock":
		mode = write
		if o.rnd.IntN(10) < 6 {
			mode = read
		}
	case "semaphore":
		mode, n = permits, 1+o.rnd.IntN(2)
	}
	if d := o.debts[i]; d != nil {
		if !o.release(d.id, i, d.mode, d.n) {
			return
		}
	}
	o.seq++
	id := fmt.Sprintf("%s.%d", o.id, o.seq)

	start := now()
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	err := h.acquire(lctx, mode, n)
	cancel()
	if err != nil {
		o.out.printf("F %s %s %s", o.sp.ID, name, failure(err))
		if !errors.Is(err, relock.ErrNotObtained) {
			sleep(ctx, 20*time.Millisecond) // Redis down or unreachable: do not spin
		}
		return
	}
	acq := now()
	lost := h.lost()
	if closed(lost) {
		o.out.printf("S %s %s %s", id, name, class(h.lostErr()))
		o.release(id, i, mode, n)
		return
	}
	fence := h.fence()
	// Mostly short stays, so that many acquisitions happen; some long
	// ones, for the faults that hit a holder to land inside.
	d := minSection + time.Duration(o.rnd.Int64N(int64(maxSection-minSection)))
	if o.rnd.IntN(longEvery) == 0 {
		d = minLong + time.Duration(o.rnd.Int64N(int64(maxLong-minLong)))
	}
	o.out.printf("E %s %s %c %d %d %d %d %d %d", id, name, mode, n, start, acq, now(), fence, d)

	// When Lost fires, as the process sees it (a goroutine stamps it).
	lostAt := make(chan int64, 1)
	stamped := make(chan struct{})
	defer close(stamped)
	go func() {
		select {
		case <-lost:
			lostAt <- now()
		case <-stamped:
		}
	}()

	// The critical section: it ends early if the hold is lost, as
	// well-written code stops when Lost fires; a nested acquire (reentrant
	// types) gives up then too.
	t := time.NewTimer(d)
	nested := "-"
	if o.rnd.IntN(4) == 0 {
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		go func() {
			select {
			case <-lost:
				cancel()
			case <-rctx.Done():
			}
		}()
		nested = outcome(h.reenter(rctx))
		cancel()
	}
	select {
	case <-t.C:
	case <-lost:
	}
	t.Stop()
	leave := now()
	wasLost := closed(lost)
	why, at := "-", int64(0)
	if wasLost {
		why = class(h.lostErr())
		select {
		case at = <-lostAt:
		case <-time.After(time.Second):
		}
		at = min(at, leave)
	}
	o.out.printf("L %s %d %d %s %d %s", id, leave, b2i(wasLost), why, at, nested)
	o.release(id, i, mode, n)
}

// release gives the hold of handle i back, even after SIGTERM, and
// reports how; it reports false if the outcome stayed unknown (the handle
// then owes the unlock, paid before its next acquire).
func (o *owner) release(id string, i int, mode byte, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tries, err := unlockAgain(ctx, func() error { return o.handles[i].release(ctx, mode, n) })
	if d := o.debts[i]; d != nil && d.id == id {
		tries++ // an owed unlock: its attempts began in an earlier call
	}
	debugf("%s unlock %s: tries=%d err=%v", o.sp.ID, id, tries, err)
	o.out.printf("U %s %s %d %d", id, outcome(err), now(), tries)
	known := err == nil || errors.Is(err, relock.ErrNotHeld)
	o.debts[i] = nil
	if !known {
		o.debts[i] = &debt{id: id, mode: mode, n: n}
	}
	return known
}

// outcome names the outcome of an unlock or a nested acquire.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, relock.ErrNotHeld):
		return "notheld-" + class(err)
	case errors.Is(err, relock.ErrNotObtained):
		return "notobtained"
	}
	return "err"
}

// unlockAgain calls unlock until its outcome is known: an unlock whose
// reply was lost (a network error) is safe to repeat, and must be, or the
// hold stays with the handle until its next call.
// It returns how many calls it took and the last outcome.
func unlockAgain(ctx context.Context, unlock func() error) (int, error) {
	for tries := 1; ; tries++ {
		err := unlock()
		if err == nil || errors.Is(err, relock.ErrNotHeld) || ctx.Err() != nil {
			return tries, err
		}
		debugf("unlock attempt %d: %v", tries, err)
		sleep(ctx, 50*time.Millisecond)
	}
}

var debugFile = func() *os.File {
	dir := os.Getenv("RELOCK_CHAOS_DEBUG")
	if dir == "" || os.Getenv(workerEnv) == "" {
		return nil
	}
	f, _ := os.Create(fmt.Sprintf("%s/%d.log", dir, os.Getpid()))
	return f
}()

func debugf(format string, args ...any) {
	if debugFile != nil {
		fmt.Fprintf(debugFile, time.Now().Format("15:04:05.000000 ")+format+"\n", args...)
	}
}

// class names why a hold was lost.
func class(err error) string {
	switch {
	case err == nil:
		return "-"
	case errors.Is(err, relock.ErrLeaseExpired):
		return "expired"
	case errors.Is(err, relock.ErrLockGone):
		return "gone"
	case errors.Is(err, relock.ErrClosed):
		return "closed"
	}
	return "other"
}

// failure names why an acquire failed.
func failure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "stopped"
	case errors.Is(err, relock.ErrNotHeld):
		return "owed"
	}
	return "error"
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return c != nil
	default:
		return false
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// exclusiveLock is what mutex, reentrant and fair handles have in common.
type exclusiveLock interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
	LostErr() error
	Fence() int64
}

type exclusiveHandle struct {
	l  exclusiveLock
	re exclusiveLock // the same lock when it is reentrant; else nil
}

func (h exclusiveHandle) acquire(ctx context.Context, _ byte, _ int) error { return h.l.Lock(ctx) }
func (h exclusiveHandle) release(ctx context.Context, _ byte, _ int) error { return h.l.Unlock(ctx) }
func (h exclusiveHandle) lost() <-chan struct{}                            { return h.l.Lost() }
func (h exclusiveHandle) lostErr() error                                   { return h.l.LostErr() }
func (h exclusiveHandle) fence() int64                                     { return h.l.Fence() }
func (h exclusiveHandle) reenter(ctx context.Context) error {
	if h.re == nil {
		return nil
	}
	if err := h.re.Lock(ctx); err != nil {
		return err
	}
	return nestedUnlock(h.re.Unlock)
}

// nestedUnlock gives back a nested hold, whatever happened to the hold
// meanwhile: an unlock not paid would be counted against the outer one.
func nestedUnlock(unlock func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := unlockAgain(ctx, func() error { return unlock(ctx) })
	return err
}

type rwHandle struct{ l *rwlock.RWMutex }

func (h rwHandle) acquire(ctx context.Context, mode byte, _ int) error {
	if mode == read {
		return h.l.RLock(ctx)
	}
	return h.l.Lock(ctx)
}

func (h rwHandle) release(ctx context.Context, mode byte, _ int) error {
	if mode == read {
		return h.l.RUnlock(ctx)
	}
	return h.l.Unlock(ctx)
}

func (h rwHandle) lost() <-chan struct{} { return h.l.Lost() }
func (h rwHandle) lostErr() error        { return h.l.LostErr() }
func (h rwHandle) fence() int64          { return h.l.Fence() }

// reenter takes a read hold inside the section (a re-entry for a reader, a
// downgrade's read for a writer) and gives it back.
func (h rwHandle) reenter(ctx context.Context) error {
	if err := h.l.RLock(ctx); err != nil {
		return err
	}
	return nestedUnlock(h.l.RUnlock)
}

type semHandle struct{ s *semaphore.Semaphore }

func (h semHandle) acquire(ctx context.Context, _ byte, n int) error { return h.s.Acquire(ctx, n) }
func (h semHandle) release(ctx context.Context, _ byte, n int) error { return h.s.Release(ctx, n) }
func (h semHandle) lost() <-chan struct{}                            { return h.s.Lost() }
func (h semHandle) lostErr() error                                   { return h.s.LostErr() }
func (h semHandle) fence() int64                                     { return 0 }
func (h semHandle) reenter(context.Context) error                    { return nil }

// broken is the negative control's "lock": it never excludes anybody.
type broken struct{}

func (broken) acquire(context.Context, byte, int) error { return nil }
func (broken) release(context.Context, byte, int) error { return nil }
func (broken) lost() <-chan struct{}                    { return nil }
func (broken) lostErr() error                           { return nil }
func (broken) fence() int64                             { return 0 }
func (broken) reenter(context.Context) error            { return nil }

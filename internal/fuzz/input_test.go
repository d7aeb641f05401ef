package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/internal/watchdog"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

// lockCalls are one handle's acquire and release calls.
type lockCalls struct {
	try    func(ctx context.Context) (bool, error)
	lock   func(ctx context.Context) error
	unlock func(ctx context.Context) error
}

// typed opens a handle of every lock type (the semaphore with permits,
// taking one permit at a time; the rwlock's write side) on name.
func typed(c *relock.Client, name string, permits int, opts ...relock.LockOption) map[string]lockCalls {
	m, r, f, w := mutex.New(c, name, opts...), reentrant.New(c, name, opts...), fair.New(c, name, opts...), rwlock.New(c, name, opts...)
	s := semaphore.New(c, name, permits, opts...)
	return map[string]lockCalls{
		"mutex":     {m.TryLock, m.Lock, m.Unlock},
		"reentrant": {r.TryLock, r.Lock, r.Unlock},
		"fair":      {f.TryLock, f.Lock, f.Unlock},
		"rwlock":    {w.TryLock, w.Lock, w.Unlock},
		"semaphore": {func(ctx context.Context) (bool, error) { return s.TryAcquire(ctx, 1) },
			func(ctx context.Context) error { return s.Acquire(ctx, 1) },
			func(ctx context.Context) error { return s.Release(ctx, 1) }},
	}
}

// FuzzNames: a lock name is any bytes. An invalid one (empty, longer than
// 1024 bytes, starting with '}') makes every call of every lock type fail
// with ErrInvalidName and touch nothing; with a valid one, every key of
// every lock type of that name, a waiter's queue included, lives in the
// one cluster slot of the name's hash tag, and all go with the holds
// (but the fencing counter, and keys with a TTL).
func FuzzNames(f *testing.F) {
	for _, name := range []string{"orders:42", "", "}", "}x", "a}b{c", "{", "{}", "a{b}c", "x}", "\x00", "ü{}",
		strings.Repeat("n", 1024), strings.Repeat("n", 1025), "a b\r\n\t", "*?[", "relock:mutex:{x}"} {
		f.Add(name)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, name string) {
		defer hangGuard(fmt.Sprintf("%q", name))()
		e.reset()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		valid := name != "" && len(name) <= 1024 && name[0] != '}'
		c := e.clients[0]
		holders, waiters := typed(c, name, 1, relock.WithFencing()), typed(e.clients[1], name, 1)
		tag := -1
		for kind, h := range holders {
			base := keyOf(kind)(name)
			if !valid {
				ok, err := h.try(ctx)
				wantInvalidName(t, kind+" TryLock", ok, err)
				wantInvalidName(t, kind+" Lock", false, h.lock(ctx))
				wantInvalidName(t, kind+" Unlock", false, h.unlock(ctx))
				continue
			}
			ok, err := h.try(ctx)
			if err != nil || !ok {
				t.Fatalf("%s TryLock of %q: %v, %v", kind, name, ok, err)
			}
			// A waiter queues (and, for the fair lock, subscribes its own
			// channel): look at the keys while it waits.
			wctx, wcancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() { got <- waiters[kind].lock(wctx) }()
			for !e.m.Exists(base + ":queue") {
				if ctx.Err() != nil {
					t.Fatalf("%s: the waiter never queued", kind)
				}
				time.Sleep(100 * time.Microsecond)
			}
			keys := e.m.Keys()
			wcancel()
			if err := <-got; !errors.Is(err, relock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: the waiter's Lock: %v", kind, err)
			}
			if tag < 0 {
				tag = int(watchdog.Slot(base))
			}
			for _, k := range keys {
				if !strings.HasPrefix(k, "relock:") {
					t.Fatalf("a key outside relock's: %q", k)
				}
				if int(watchdog.Slot(k)) != tag {
					t.Fatalf("key %q in slot %d, the lock's (%q) in %d", k, watchdog.Slot(k), base, tag)
				}
			}
			if err := h.unlock(ctx); err != nil {
				t.Fatalf("%s Unlock of %q: %v", kind, name, err)
			}
			for _, k := range e.m.Keys() {
				if !strings.HasSuffix(k, "}:fence") && e.m.TTL(k) <= 0 {
					t.Fatalf("%s: key %q left without a TTL", kind, k)
				}
			}
		}
		l := latch.New(c, name)
		ok, err := l.TrySetCount(ctx, 1)
		if !valid {
			wantInvalidName(t, "latch TrySetCount", ok, err)
			wantInvalidName(t, "latch CountDown", false, l.CountDown(ctx))
			wantInvalidName(t, "latch Wait", false, l.Wait(ctx))
			if keys := e.m.Keys(); len(keys) > 0 {
				t.Fatalf("keys made for an invalid name: %q", keys)
			}
			return
		}
		if err != nil || !ok {
			t.Fatalf("latch TrySetCount of %q: %v, %v", name, ok, err)
		}
		for _, k := range e.m.Keys() {
			if int(watchdog.Slot(k)) != tag {
				t.Fatalf("key %q in slot %d, the lock's in %d", k, watchdog.Slot(k), tag)
			}
		}
		if err := l.CountDown(ctx); err != nil {
			t.Fatalf("latch CountDown: %v", err)
		}
		if err := l.Wait(ctx); err != nil {
			t.Fatalf("latch Wait: %v", err)
		}
	})
}

func wantInvalidName(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if ok || !errors.Is(err, relock.ErrInvalidName) {
		t.Fatalf("%s: %v, %v; want ErrInvalidName", what, ok, err)
	}
}

// FuzzOptions: any option value is accepted by the constructors; an
// invalid one (a lease, heartbeat or watchdog timeout outside [10ms, 7d], a
// polling interval outside [1ms, 1s], fewer than 1 sync replica or a sync
// timeout outside [1ms, 1m], semaphore permits or a latch count outside
// [1, MaxInt32]) makes every call fail with ErrInvalidOption, and nil
// options, loggers and observers are ignored; with valid values, TryLock
// and Unlock work (a hold whose lease is shorter than a second may be
// lost before its Unlock, which then says so), and WithSyncReplicas, with
// no replica to wait for, gives ErrNotReplicated.
func FuzzOptions(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add(int64(0), int64(0), int64(0), int64(0), 0, int64(0), 1, 1, uint8(0))
	f.Add(10*ms, 10*ms, 10*ms, ms, 1, ms, 1, 1, uint8(0xff))
	f.Add(9*ms, 5000*ms, 30000*ms, 1000*ms, 0, 60001*ms, 0, 0, uint8(0x1f))
	f.Add(9*ms, 5000*ms, 30000*ms, 1001*ms, 2, 60000*ms, 3, 3, uint8(0x3e))
	f.Add(int64(7*24*time.Hour), int64(7*24*time.Hour+1), -ms, 0*ms, -1, -ms, math.MaxInt32, math.MaxInt32+1, uint8(0x0f))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(1), int64(-1), math.MaxInt, int64(math.MaxInt64), math.MinInt, math.MinInt, uint8(0x7f))
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, lease, heartbeat, wd, poll int64, syncN int, syncTimeout int64, permits, count int, flags uint8) {
		defer hangGuard(fmt.Sprint(lease, heartbeat, wd, poll, syncN, syncTimeout, permits, count, flags))()
		name := e.reset()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inLease := func(d int64) bool { return d >= int64(10*time.Millisecond) && d <= int64(7*24*time.Hour) }
		inMinute := func(d int64) bool { return d >= int64(time.Millisecond) && d <= int64(time.Minute) }
		inSecond := func(d int64) bool { return d >= int64(time.Millisecond) && d <= int64(time.Second) }

		var copts []relock.Option
		clientOK := true
		if flags&1 != 0 {
			copts = append(copts, relock.WithWatchdogTimeout(time.Duration(wd)))
			clientOK = clientOK && inLease(wd)
		}
		if flags&2 != 0 {
			copts = append(copts, relock.WithPolling(time.Duration(poll)))
			clientOK = clientOK && inSecond(poll)
		}
		if flags&4 != 0 {
			copts = append(copts, nil, relock.WithLogger(nil), relock.WithObserver(nil))
		}
		c := relock.New(e.rdb, copts...)
		defer c.Close()
		if err := c.Err(); clientOK != (err == nil) || (err != nil && !errors.Is(err, relock.ErrInvalidOption)) {
			t.Fatalf("Client options valid %v: Err() = %v", clientOK, err)
		}

		var lopts []relock.LockOption
		lockOK, short, sync := true, false, false
		if flags&8 != 0 {
			lopts = append(lopts, relock.WithLease(time.Duration(lease)))
			lockOK = lockOK && inLease(lease)
			short = lease < int64(time.Second)
		} else {
			short = flags&1 != 0 && wd < int64(time.Second)
		}
		if flags&16 != 0 {
			lopts = append(lopts, relock.WithHeartbeat(time.Duration(heartbeat)))
			lockOK = lockOK && inLease(heartbeat)
		}
		if flags&32 != 0 {
			lopts = append(lopts, relock.WithSyncReplicas(syncN, time.Duration(syncTimeout)))
			lockOK = lockOK && syncN >= 1 && inMinute(syncTimeout)
			sync = true
		}
		if flags&64 != 0 {
			lopts = append(lopts, nil, relock.WithFencing())
		}
		permitsOK := permits >= 1 && permits <= math.MaxInt32

		for kind, h := range typed(c, name, permits, lopts...) {
			valid := clientOK && lockOK && (kind != "semaphore" || permitsOK)
			ok, err := h.try(ctx)
			switch {
			case !valid:
				wantInvalidOption(t, kind+" TryLock", ok, err)
				wantInvalidOption(t, kind+" Lock", false, h.lock(ctx))
				wantInvalidOption(t, kind+" Unlock", false, h.unlock(ctx))
			case sync:
				if ok || !errors.Is(err, relock.ErrNotReplicated) {
					t.Fatalf("%s TryLock with no replica: %v, %v; want ErrNotReplicated", kind, ok, err)
				}
				if err := h.unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
					t.Fatalf("%s Unlock after ErrNotReplicated: %v", kind, err)
				}
			default:
				if err != nil || !ok {
					t.Fatalf("%s TryLock: %v, %v", kind, ok, err)
				}
				// A lease shorter than a second may run out before the
				// Unlock: it then reports the loss (as ErrLockGone when
				// the Unlock reaches Redis after the lease ran out there
				// but before the watchdog's timer noticed it here).
				err := h.unlock(ctx)
				lost := errors.Is(err, relock.ErrNotHeld) &&
					(errors.Is(err, relock.ErrLeaseExpired) || errors.Is(err, relock.ErrLockGone))
				if err != nil && !(short && lost) {
					t.Fatalf("%s Unlock: %v", kind, err)
				}
			}
		}
		l := latch.New(c, name, lopts...)
		countOK := count >= 1 && count <= latch.MaxCount
		ok, err := l.TrySetCount(ctx, count)
		switch {
		case !clientOK || !lockOK || !countOK:
			wantInvalidOption(t, "latch TrySetCount", ok, err)
		case err != nil || !ok:
			t.Fatalf("latch TrySetCount(%d): %v, %v", count, ok, err)
		}
	})
}

func wantInvalidOption(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if ok || !errors.Is(err, relock.ErrInvalidOption) {
		t.Fatalf("%s: %v, %v; want ErrInvalidOption", what, ok, err)
	}
}

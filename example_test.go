package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/mutex"
)

// Do runs a job under a lock: fn's ctx ends when the hold does, and the
// lock is released when fn returns, whatever the caller's ctx says.
func ExampleDo() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	lock := mutex.New(c, "nightly-report")
	err := relock.Do(ctx, lock, func(ctx context.Context) error {
		for step := 1; step <= 3; step++ {
			if err := ctx.Err(); err != nil {
				return err // the hold is gone (context.Cause says why): stop
			}
			fmt.Println("step", step, "held:", lock.Held())
		}
		return nil
	})
	fmt.Println("done:", err, "held:", lock.Held())
	// Output:
	// step 1 held: true
	// step 2 held: true
	// step 3 held: true
	// done: <nil> held: false
}

// Do's error tells a lost hold from the job's own failure.
func ExampleDo_lost() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	lock := mutex.New(c, "import")
	err := relock.Do(ctx, lock, func(ctx context.Context) error {
		srv.Del("relock:mutex:{import}")  // the lock is deleted behind our back
		_ = lock.Extend(ctx, time.Minute) // the next call to Redis finds out
		<-ctx.Done()
		fmt.Println("stopped:", errors.Is(context.Cause(ctx), relock.ErrLockGone))
		return ctx.Err()
	})
	fmt.Println("lost:", errors.Is(err, relock.ErrNotHeld), errors.Is(err, relock.ErrLockGone))
	// Output:
	// stopped: true
	// lost: true true
}

// A dispatcher takes a lock and hands the hold to a worker, which may run
// in another process: the worker makes a handle with the hold's token and
// resumes it.
func ExampleWithToken() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	ctx := context.Background()

	dispatcher := relock.New(rdb)
	job := mutex.New(dispatcher, "job:42")
	if err := job.Lock(ctx); err != nil {
		panic(err)
	}
	token := job.Token() // sent to the worker with the job (a capability: keep it secret)

	worker := relock.New(rdb) // in the worker's process
	defer worker.Close()
	mine := mutex.New(worker, "job:42", relock.WithToken(token))
	fmt.Println("resume:", mine.Resume(ctx), "held:", mine.Held())
	dispatcher.Close() // the dispatcher is done; the worker's watchdog renews the hold now
	fmt.Println("unlock:", mine.Unlock(ctx))
	// Output:
	// resume: <nil> held: true
	// unlock: <nil>
}

// Two accounts are updated together under both of their locks. Whatever
// order each transfer names them in, the Multi takes them in one order,
// so concurrent transfers never deadlock.
func ExampleMultiLock() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()
	rdb.Set(ctx, "balance:alice", 100, 0)
	rdb.Set(ctx, "balance:bob", 100, 0)

	transfer := func(from, to string, amount int64) error {
		both := relock.MultiLock(mutex.New(c, "account:"+from), mutex.New(c, "account:"+to))
		return relock.Do(ctx, both, func(ctx context.Context) error {
			if err := rdb.DecrBy(ctx, "balance:"+from, amount).Err(); err != nil {
				return err
			}
			return rdb.IncrBy(ctx, "balance:"+to, amount).Err()
		})
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); _ = transfer("alice", "bob", 3) }()
		go func() { defer wg.Done(); _ = transfer("bob", "alice", 1) }()
	}
	wg.Wait()
	alice, _ := rdb.Get(ctx, "balance:alice").Int()
	bob, _ := rdb.Get(ctx, "balance:bob").Int()
	fmt.Println("alice", alice, "bob", bob)
	// Output: alice 80 bob 120
}

// With fencing, every hold of a lock gets a token that grows with each
// hold. The resource refuses a write whose token is lower than one it has
// seen: a holder that was paused past its lease, while another took the
// lock, cannot overwrite the newer holder's work.
func ExampleWithFencing() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	var highest int64 // kept by the resource (in practice: next to the data, checked in the write)
	write := func(token int64, what string) {
		if token < highest {
			fmt.Println("refused:", what)
			return
		}
		highest = token
		fmt.Println("written:", what)
	}

	first := mutex.New(c, "report", relock.WithFencing(), relock.WithLease(10*time.Second))
	if err := first.Lock(ctx); err != nil {
		panic(err)
	}
	token := first.Fence()
	srv.FastForward(11 * time.Second) // first is paused past its lease: the lock expires

	second := mutex.New(c, "report", relock.WithFencing())
	_ = relock.Do(ctx, second, func(ctx context.Context) error {
		write(second.Fence(), "second's report")
		return nil
	})
	write(token, "first's report, late") // first wakes up
	fmt.Println("first's unlock:", errors.Is(first.Unlock(ctx), relock.ErrNotHeld))
	// Output:
	// written: second's report
	// refused: first's report, late
	// first's unlock: true
}

// An observer sees every hold begin and end, and every acquire that
// failed, with the lock's kind and name (and the owner's fingerprint,
// never its token): feed metrics, traces or logs from it.
func ExampleWithObserver() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}),
		relock.WithObserver(func(e relock.Event) {
			if e.Type == relock.EventFailed {
				fmt.Println(e.Type, e.Kind, e.Name, "- timed out:", errors.Is(e.Err, context.DeadlineExceeded))
				return
			}
			fmt.Println(e.Type, e.Kind, e.Name)
		}))
	defer c.Close()
	ctx := context.Background()

	lock := mutex.New(c, "report")
	_ = relock.Do(ctx, lock, func(ctx context.Context) error {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		return mutex.New(c, "report").Lock(tctx) // another owner gives up
	})
	// Output:
	// acquired mutex report
	// failed mutex report - timed out: true
	// released mutex report
}

package relock_test

import (
	"context"
	"errors"
	"fmt"
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

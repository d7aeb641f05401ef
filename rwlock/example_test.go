package rwlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/rwlock"
)

// Readers share the lock; a writer excludes them. The example runs on an
// embedded miniredis; use your Redis address instead.
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()

	reader := rwlock.New(c, "config")
	other := rwlock.New(c, "config")
	writer := rwlock.New(c, "config")

	if err := reader.RLock(ctx); err != nil {
		panic(err)
	}
	ok, _ := other.TryRLock(ctx)
	fmt.Println("second reader admitted:", ok)
	ok, _ = writer.TryLock(ctx)
	fmt.Println("writer admitted while reading:", ok)
	_ = other.RUnlock(ctx)
	_ = reader.RUnlock(ctx)

	if err := writer.Lock(ctx); err != nil {
		panic(err)
	}
	ok, _ = reader.TryRLock(ctx)
	fmt.Println("reader admitted while writing:", ok)
	_ = writer.Unlock(ctx)

	// A handle that holds only reads cannot upgrade: it gets an error
	// instead of deadlocking with itself.
	_ = reader.RLock(ctx)
	err = reader.Lock(ctx)
	fmt.Println("upgrade refused:", errors.Is(err, relock.ErrUpgrade))
	_ = reader.RUnlock(ctx)
	// Output:
	// second reader admitted: true
	// writer admitted while reading: false
	// reader admitted while writing: false
	// upgrade refused: true
}

// Do takes a read hold through RLocker: readers share the lock while
// writers wait, and the function's ctx ends if the hold is lost.
func ExampleRWMutex_RLocker() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	config := rwlock.New(c, "config")
	err := relock.Do(ctx, config.RLocker(), func(ctx context.Context) error {
		// ... read the configuration, with ctx ...
		writer := rwlock.New(c, "config")
		ok, err := writer.TryLock(ctx)
		fmt.Println("reading; a writer admitted:", ok, err)
		return nil
	})
	fmt.Println("done:", err, "- still reading:", config.RHeld())
	// Output:
	// reading; a writer admitted: false <nil>
	// done: <nil> - still reading: false
}

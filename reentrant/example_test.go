package reentrant_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/reentrant"
)

// A function holding "order:42" calls another that locks "order:42"
// through the same handle: the inner Do re-enters instead of deadlocking,
// while a second handle stays out until the outer Do unlocks.
func Example_nested() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	order := reentrant.New(c, "order:42")
	other := reentrant.New(c, "order:42")

	addLine := func(ctx context.Context) error {
		return relock.Do(ctx, order, func(ctx context.Context) error { // re-entry: count 2
			n, _ := order.HoldCount(ctx)
			ok, _ := other.TryLock(ctx)
			fmt.Println("inner: holds", n, "- other handle got it:", ok)
			return nil
		})
	}

	err := relock.Do(ctx, order, func(ctx context.Context) error {
		if err := addLine(ctx); err != nil {
			return err
		}
		n, _ := order.HoldCount(ctx)
		fmt.Println("outer: holds", n)
		return nil
	})
	if err != nil {
		panic(err)
	}
	ok, _ := other.TryLock(ctx)
	fmt.Println("after the outer unlock, other handle got it:", ok)
	_ = other.Unlock(ctx)
	// Output:
	// inner: holds 2 - other handle got it: false
	// outer: holds 1
	// after the outer unlock, other handle got it: true
}

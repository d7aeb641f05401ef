package latch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/latch"
)

// A coordinator waits for 5 workers (they could be in 5 processes) to
// finish their part. The example runs on an embedded miniredis; use your
// Redis address instead.
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

	done := latch.New(c, "batch-42")
	if ok, err := done.TrySetCount(ctx, 5); err != nil || !ok {
		panic(fmt.Sprint("count not set: ", ok, err))
	}
	var finished atomic.Int32
	var workers sync.WaitGroup
	for w := 0; w < 5; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			l := latch.New(c, "batch-42") // each worker's own handle
			finished.Add(1)               // the worker's part of the batch
			if err := l.CountDown(ctx); err != nil {
				panic(err)
			}
		}()
	}

	if err := done.Wait(ctx); err != nil { // woken by the fifth CountDown
		panic(err)
	}
	n, _ := done.Count(ctx)
	fmt.Println("workers finished:", finished.Load())
	workers.Wait() // the example's goroutines end before the Client closes
	fmt.Println("count:", n)
	// Output:
	// workers finished: 5
	// count: 0
}

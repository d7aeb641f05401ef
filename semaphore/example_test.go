package semaphore_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/semaphore"
)

// Workers (they could be in many processes) call a rate-limited API that
// allows 3 calls in flight: each takes a permit of the semaphore "api"
// for the duration of its call. A worker that crashes mid-call gives its
// permit back within one lease. The example runs on an embedded
// miniredis; use your Redis address instead.
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

	var mu sync.Mutex // guards the local tallies only
	inFlight, most, calls := 0, 0, 0
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := semaphore.New(c, "api", 3) // one handle per worker
			for job := 0; job < 3; job++ {
				// Do holds one permit while the function runs.
				err := relock.Do(ctx, api.Locker(1), func(ctx context.Context) error {
					mu.Lock()
					inFlight++
					most = max(most, inFlight)
					mu.Unlock()

					time.Sleep(5 * time.Millisecond) // the API call, with ctx

					mu.Lock()
					inFlight--
					calls++
					mu.Unlock()
					return nil
				})
				if err != nil {
					fmt.Println(err)
				}
			}
		}()
	}
	wg.Wait()
	free, _ := semaphore.New(c, "api", 3).Available(ctx)
	fmt.Println("calls:", calls)
	fmt.Println("never more than 3 in flight:", most <= 3)
	fmt.Println("permits free:", free)
	// Output:
	// calls: 24
	// never more than 3 in flight: true
	// permits free: 3
}

// A batch job takes 4 of the 10 permits at once; small jobs that arrive
// after it wait behind it even while permits are free, so it is never
// starved by them.
func ExampleSemaphore_Acquire() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	busy := semaphore.New(c, "pool", 10)
	_ = busy.Acquire(ctx, 8) // 2 permits free

	batch := semaphore.New(c, "pool", 10)
	got := make(chan struct{})
	go func() {
		_ = batch.Acquire(ctx, 4) // waits: only 2 are free
		close(got)
	}()
	time.Sleep(100 * time.Millisecond)

	small := semaphore.New(c, "pool", 10)
	ok, _ := small.TryAcquire(ctx, 1)
	fmt.Println("small job overtakes the batch:", ok)

	_ = busy.Release(ctx, 8)
	<-got
	fmt.Println("batch holds:", batch.Held())
	_ = batch.Release(ctx, 4)
	// Output:
	// small job overtakes the batch: false
	// batch holds: 4
}

package mutex_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/mutex"
)

// Many workers (they could be in many processes) sell one product. Each
// decrements the stock under the product's lock, so it never oversells.
func Example_stock() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()

	rdb.Set(ctx, "stock:sku-1", 10, 0)
	var sold, refused int
	var mu sync.Mutex // guards the local tallies only
	var wg sync.WaitGroup
	for w := 0; w < 25; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock := mutex.New(c, "stock:sku-1") // one handle per worker
			if err := lock.Lock(ctx); err != nil {
				panic(err)
			}
			defer lock.Unlock(ctx)

			// Read, check, write: safe only because of the lock.
			n, _ := rdb.Get(ctx, "stock:sku-1").Int()
			mu.Lock()
			defer mu.Unlock()
			if n == 0 {
				refused++
				return
			}
			rdb.Set(ctx, "stock:sku-1", n-1, 0)
			sold++
		}()
	}
	wg.Wait()
	left, _ := rdb.Get(ctx, "stock:sku-1").Int()
	fmt.Println("sold", sold, "refused", refused, "left", left)
	// Output: sold 10 refused 15 left 0
}

// Lost fires when the lock is lost while held, e.g. because Redis deleted
// it; protected work watches it and stops.
func ExampleMutex_Lost() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	m := mutex.New(c, "report")
	if err := m.Lock(ctx); err != nil {
		panic(err)
	}
	work, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-m.Lost():
			stop() // the lock is gone: abandon the protected work
		case <-work.Done():
		}
	}()

	c.Close() // e.g. shutdown: holds are no longer renewed, so they are lost
	<-work.Done()
	fmt.Println("work stopped:", context.Cause(work))
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// work stopped: context canceled
	// unlock: mutex: unlock "report": relock: lock not held: client closed
}

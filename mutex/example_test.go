package mutex_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/mutex"
)

// setStock writes a new stock level only while the caller holds the
// product's lock (see relock.Script): a worker paused past its lease,
// whose lock another worker now holds, cannot write a stale level.
var setStock = relock.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)

// Many workers (they could be in many processes) sell one product. Each
// reads, checks and writes the stock under the product's lock, with
// relock.Do, and writes it with a script guarded by the hold, so it never
// oversells, even when a worker stalls past its lease.
func Example_stock() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()

	const stock = "stock:{sku-1}" // in the slot of the lock "sku-1" on a Cluster
	rdb.Set(ctx, stock, 10, 0)
	var sold, refused atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 25; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock := mutex.New(c, "sku-1") // one handle per worker: the handle is the owner
			err := relock.Do(ctx, lock, func(ctx context.Context) error {
				n, err := rdb.Get(ctx, stock).Int()
				if err != nil {
					return err
				}
				if n == 0 {
					refused.Add(1)
					return nil
				}
				// ... the work the lock protects: charge the customer ...
				if err := lock.Run(ctx, setStock, []string{stock}, n-1).Err(); err != nil {
					return err // relock.ErrNotHeld: this worker lost the lock meanwhile
				}
				sold.Add(1)
				return nil
			})
			if err != nil {
				fmt.Println(err)
			}
		}()
	}
	wg.Wait()
	left, _ := rdb.Get(ctx, stock).Int()
	fmt.Println("sold", sold.Load(), "refused", refused.Load(), "left", left)
	// Output: sold 10 refused 15 left 0
}

// Lost fires when the lock is lost while held, e.g. because Redis deleted
// it; protected work stops then. HoldContext is the shortest way to watch
// it: a context cancelled when Lost fires (or at Unlock), whose Cause is
// the loss.
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
	work := m.HoldContext(ctx) // give it to the protected work

	c.Close() // e.g. shutdown: holds are no longer renewed, so they are lost
	<-work.Done()
	<-m.Lost() // closed by then too
	fmt.Println("work stopped:", context.Cause(work))
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// work stopped: relock: lock not held: client closed
	// unlock: mutex: unlock "report": relock: lock not held: client closed
}

// A job with a fixed lease extends it as it goes: each step gets a lease
// of its own, and a holder that stops extending (a stuck process) loses
// the lock at the end of the current one.
func ExampleMutex_Extend() {
	srv, _ := miniredis.Run()
	defer srv.Close()
	c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
	defer c.Close()
	ctx := context.Background()

	m := mutex.New(c, "migration")
	if err := m.LockFor(ctx, 10*time.Second); err != nil {
		panic(err)
	}
	for step := 1; step <= 3; step++ {
		// ... a step of the migration, under 10 s ...
		if err := m.Extend(ctx, 10*time.Second); err != nil {
			fmt.Println("lost the lock:", err)
			return
		}
		fmt.Println("step", step, "done; lease", srv.TTL("relock:mutex:{migration}"))
	}
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// step 1 done; lease 10s
	// step 2 done; lease 10s
	// step 3 done; lease 10s
	// unlock: <nil>
}

package fair_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
)

// Waiters are served in the order they joined the queue, whatever their
// Client or process.
func Example() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()

	holder := fair.New(c, "printer")
	if err := holder.Lock(ctx); err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var served []string
	for i, who := range []string{"ann", "bob", "cid"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := fair.New(c, "printer")
			if err := l.Lock(ctx); err != nil {
				panic(err)
			}
			mu.Lock()
			served = append(served, who)
			mu.Unlock()
			_ = l.Unlock(ctx)
		}()
		// Let this waiter join the queue before the next one comes.
		for rdb.ZCard(ctx, "relock:fair:{printer}:queue").Val() != int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	_ = holder.Unlock(ctx)
	wg.Wait()
	fmt.Println(served)
	// Output: [ann bob cid]
}

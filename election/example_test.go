package election_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
)

// One candidate leads while it runs its function; a standby candidate
// takes over when it resigns; an observer sees every change, in order.
func Example() {
	srv, _ := miniredis.Run() // any Redis: here an embedded one
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c := relock.New(rdb)
	defer c.Close()
	ctx := context.Background()

	// Anyone can follow the election.
	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := election.New(c, "scheduler").Observe(octx)
	show := func() {
		if l := <-changes; l.Vacant() {
			fmt.Println("no leader")
		} else {
			fmt.Printf("term %d: %s\n", l.Term, l.Value)
		}
	}
	show()

	a, b := election.New(c, "scheduler"), election.New(c, "scheduler")
	standby := make(chan error, 1)
	err := a.Do(ctx, "host-a", func(lctx context.Context) error {
		show()
		// lctx ends if the leadership is lost; a.Term() is the fencing
		// token of what the leader writes.
		if err := a.Proclaim(lctx, "host-a, busy"); err != nil {
			return err
		}
		show()
		go func() { standby <- b.Campaign(ctx, "host-b") }()
		// Let the standby join the queue before this leader resigns.
		for rdb.ZCard(ctx, "relock:election:{scheduler}:queue").Val() != 1 {
			time.Sleep(time.Millisecond)
		}
		return nil // Do resigns: the standby leads next
	})
	if err != nil {
		panic(err)
	}
	if err := <-standby; err != nil {
		panic(err)
	}
	show()
	if err := b.Resign(ctx); err != nil {
		panic(err)
	}
	show()
	// Output:
	// no leader
	// term 1: host-a
	// term 1: host-a, busy
	// term 2: host-b
	// no leader
}

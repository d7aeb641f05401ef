package redlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/redlock"
)

// A job that must not run twice at once, locked on three independent
// masters: it keeps running while any one of them is down.
func Example() {
	ctx := context.Background()
	var servers []*miniredis.Miniredis
	var clients []*relock.Client // one Client per master, shared by every lock of the process
	for range 3 {
		srv, _ := miniredis.Run() // in production: three servers on separate machines, no replicas of each other
		defer srv.Close()
		c := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}))
		defer c.Close()
		servers = append(servers, srv)
		clients = append(clients, c)
	}

	// One master is down: the other two, a majority, grant and release
	// the lock. (Lock returns once a majority granted, without waiting
	// long for the slowest master: had it granted on two of three, and
	// one of those two failed during the job, Unlock could confirm the
	// release on one only, and would return an error matching
	// redlock.ErrNoQuorum.)
	servers[2].Close()
	lock := redlock.New(clients, "nightly-report")
	err := relock.Do(ctx, lock, func(ctx context.Context) error {
		// ... the job, which stops when ctx is done: the lock could no
		// longer be confirmed on a majority ...
		other := redlock.New(clients, "nightly-report") // another owner, as another process would be
		ok, err := other.TryLock(ctx)
		fmt.Println("another owner got it:", ok, err)
		return nil
	})
	fmt.Println("job:", err) // errors.Is(err, redlock.ErrNoQuorum): most masters were unreachable

	other := redlock.New(clients, "nightly-report")
	ok, err := other.TryLock(ctx)
	fmt.Println("after the job, another owner got it:", ok, err)
	fmt.Println("unlock:", other.Unlock(ctx))

	servers[1].Close() // two of three down: no majority
	_, err = other.TryLock(ctx)
	fmt.Println("with 2 of 3 masters down:", errors.Is(err, redlock.ErrNoQuorum))
	// Output:
	// another owner got it: false <nil>
	// job: <nil>
	// after the job, another owner got it: true <nil>
	// unlock: <nil>
	// with 2 of 3 masters down: true
}

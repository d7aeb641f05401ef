package relockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A waiter listens for its lock's wake-ups on a pub/sub channel under the
// lock's {name}, from its call's start (or its first refused attempt)
// until it returns. The tests use that to know, without timing guesses,
// that a call has begun: an unlock made d after a waiter was seen makes
// that waiter wait at least d, however loaded the machine.

// lockChannels returns the subscribed channels of the locks called name.
func lockChannels(t *testing.T, rdb *redis.Client, name string) []string {
	t.Helper()
	chans, err := rdb.PubSubChannels(context.Background(), "relock:*{"+name+"}*").Result()
	require.NoError(t, err)
	return chans
}

// watchWaiter watches for a waiter of the lock called name until stop is
// called; stop returns when it first saw one (that waiter's call began
// before), or false if it saw none.
func watchWaiter(rdb *redis.Client, name string) (stop func() (time.Time, bool)) {
	quit := make(chan struct{})
	res := make(chan time.Time, 1)
	go func() {
		defer close(res)
		for {
			chans, err := rdb.PubSubChannels(context.Background(), "relock:*{"+name+"}*").Result()
			if err == nil && len(chans) > 0 {
				res <- time.Now()
				return
			}
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() (time.Time, bool) {
		close(quit)
		seen, ok := <-res
		return seen, ok
	}
}

// waitedAtLeast is how long a call that failed at deadline waited at
// least, given stop from watchWaiter started before the call: 0 when the
// watcher missed the waiter (logged).
func waitedAtLeast(t *testing.T, deadline time.Time, stop func() (time.Time, bool)) time.Duration {
	t.Helper()
	seen, ok := stop()
	if !ok {
		t.Log("the waiter was not seen: its wait's lower bound is 0")
		return 0
	}
	return deadline.Sub(seen)
}

// noWaiter waits until no waiter of the lock called name listens (the
// last one's unsubscription is sent after it returned).
func noWaiter(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(lockChannels(t, rdb, name)) == 0 }, 5*time.Second, time.Millisecond,
		"waiters of %q still listen", name)
}

// unlockAfterWaiter runs unlock d after a waiter of name was seen, in a
// goroutine; the returned channel has unlock's error.
func unlockAfterWaiter(t *testing.T, rdb *redis.Client, name string, d time.Duration, unlock func() error) <-chan error {
	t.Helper()
	noWaiter(t, rdb, name)
	done := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			chans, err := rdb.PubSubChannels(context.Background(), "relock:*{"+name+"}*").Result()
			if err == nil && len(chans) > 0 {
				break
			}
			if time.Now().After(deadline) {
				done <- unlock() // the waiter never came: the test fails on its wait
				return
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(d)
		done <- unlock()
	}()
	return done
}

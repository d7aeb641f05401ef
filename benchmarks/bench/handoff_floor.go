package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// pushFloor is the least a pushed hand-off can cost, measured with plain
// go-redis clients under the same idle holds as the lock: the holder
// PUBLISHes (its release), the waiter's subscription receives it, and the
// waiter takes the key with SET NX PX. It also measures a PING sent after
// the same idle hold: on a machine that was idle, a round trip costs more
// than in a hot loop, and the hand-off is made of such round trips.
//
// On a cluster the holder publishes with SPUBLISH to a channel of the
// key's slot, which the waiter's cluster client receives with SSUBSCRIBE
// from the key's master, and the PING goes to that master.
type pushFloor struct {
	holder, waiter, sub redis.UniversalClient
	cluster             bool
	pinger              redis.UniversalClient // the key's server
	ps                  *redis.PubSub
	msgs                <-chan *redis.Message
	channel, key        string
}

func newPushFloor(ctx context.Context, srv *Server, name string) (*pushFloor, error) {
	f := &pushFloor{
		holder:  srv.NewRedis(nil),
		waiter:  srv.NewRedis(nil),
		sub:     srv.NewRedis(nil),
		channel: "relockbench:floor:" + name,
		key:     "relockbench:floor:{" + name + "}",
	}
	f.pinger = f.holder
	f.ps = f.sub.Subscribe(ctx, f.channel)
	return f.subscribed(ctx)
}

// newClusterPushFloor is newPushFloor on cluster clients of c.
func newClusterPushFloor(ctx context.Context, c *Cluster, name string) (*pushFloor, error) {
	holder, sub := c.NewRedis(nil), c.NewRedis(nil)
	f := &pushFloor{
		holder:  holder,
		waiter:  c.NewRedis(nil),
		sub:     sub,
		cluster: true,
		key:     "relockbench:floor:{" + name + "}",
	}
	f.channel = f.key // a channel of the key's slot: published on its master
	master, err := holder.MasterForKey(ctx, f.key)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("floor: master of %q: %w", f.key, err)
	}
	f.pinger = master // the cluster client's own, closed with it
	f.ps = sub.SSubscribe(ctx, f.channel)
	return f.subscribed(ctx)
}

// subscribed waits for f's subscription to be confirmed.
func (f *pushFloor) subscribed(ctx context.Context) (*pushFloor, error) {
	if _, err := f.ps.Receive(ctx); err != nil {
		f.Close()
		return nil, fmt.Errorf("floor subscribe: %w", err)
	}
	f.msgs = f.ps.Channel()
	return f, nil
}

// publish is the holder's release message.
func (f *pushFloor) publish(ctx context.Context) error {
	if f.cluster {
		return f.holder.SPublish(ctx, f.channel, "1").Err()
	}
	return f.holder.Publish(ctx, f.channel, "1").Err()
}

// hotRTT is the median of n PINGs in a hot loop to the key's server,
// after a warm-up.
func (f *pushFloor) hotRTT(ctx context.Context, n int) (time.Duration, error) {
	return pingRTT(ctx, f.pinger, n)
}

// casPublish is the release of the script floor's holder: a
// compare-and-delete of the key that, when it deletes, publishes the
// wake-up (ARGV[2]: PUBLISH, or SPUBLISH on a cluster, where the channel
// is in the key's slot) in the same call.
var casPublish = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call(ARGV[2], ARGV[3], '1')
  return 1
end
return 0`)

// handoff runs one floor hand-off after an idle hold: the holder
// PUBLISHes.
func (f *pushFloor) handoff(ctx context.Context, hold time.Duration) (time.Duration, error) {
	return f.handOff(ctx, hold, "floor", func() error { return f.publish(ctx) })
}

// scriptHandoff runs one hand-off of the script floor after an idle hold:
// the holder's key released by casPublish (an owner-checked release, as
// a lock's must be, which publishes). On the same connections as
// handoff; the key is the holder's before the hold, unmeasured.
func (f *pushFloor) scriptHandoff(ctx context.Context, hold time.Duration) (time.Duration, error) {
	if err := f.holder.Set(ctx, f.key, "h", 30*time.Second).Err(); err != nil {
		return 0, fmt.Errorf("script floor set: %w", err)
	}
	publish := "PUBLISH"
	if f.cluster {
		publish = "SPUBLISH"
	}
	return f.handOff(ctx, hold, "script floor", func() error {
		n, err := casPublish.Run(ctx, f.holder, []string{f.key}, "h", publish, f.channel).Int()
		if err == nil && n != 1 {
			err = errors.New("the key was not the holder's")
		}
		return err
	})
}

// handOff runs one hand-off of the floor named what after an idle hold:
// at its end the holder calls release, which publishes the wake-up; the
// waiter, woken by it, takes the key with SET NX PX. It returns the time
// from the release call to the waiter's having the key, which it then
// deletes.
func (f *pushFloor) handOff(ctx context.Context, hold time.Duration, what string, release func() error) (time.Duration, error) {
	done := make(chan error, 1)
	var at time.Time
	go func() {
		select {
		case <-f.msgs:
		case <-time.After(hold + 5*time.Second):
			done <- errors.New(what + ": no message")
			return
		}
		ok, err := f.waiter.SetNX(ctx, f.key, "w", 30*time.Second).Result()
		at = time.Now()
		if err == nil && !ok {
			err = errors.New(what + ": key exists")
		}
		done <- err
	}()
	time.Sleep(hold)
	t0 := time.Now()
	if err := release(); err != nil {
		return 0, fmt.Errorf("%s release: %w", what, err)
	}
	if err := <-done; err != nil {
		return 0, err
	}
	if err := f.waiter.Del(ctx, f.key).Err(); err != nil {
		return 0, fmt.Errorf("%s del: %w", what, err)
	}
	return at.Sub(t0), nil
}

// ping times a PING sent after an idle hold.
func (f *pushFloor) ping(ctx context.Context, hold time.Duration) (time.Duration, error) {
	time.Sleep(hold)
	t0 := time.Now()
	if err := f.pinger.Ping(ctx).Err(); err != nil {
		return 0, fmt.Errorf("ping: %w", err)
	}
	return time.Since(t0), nil
}

func (f *pushFloor) Close() {
	if f.ps != nil {
		_ = f.ps.Close()
	}
	_ = f.sub.Close()
	_ = f.waiter.Close()
	_ = f.holder.Close()
}

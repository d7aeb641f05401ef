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
type pushFloor struct {
	holder, waiter, sub *redis.Client
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
	f.ps = f.sub.Subscribe(ctx, f.channel)
	if _, err := f.ps.Receive(ctx); err != nil {
		f.Close()
		return nil, fmt.Errorf("floor subscribe: %w", err)
	}
	f.msgs = f.ps.Channel()
	return f, nil
}

// handoff runs one floor hand-off after an idle hold.
func (f *pushFloor) handoff(ctx context.Context, hold time.Duration) (time.Duration, error) {
	done := make(chan error, 1)
	var at time.Time
	go func() {
		select {
		case <-f.msgs:
		case <-time.After(hold + 5*time.Second):
			done <- errors.New("floor: no message")
			return
		}
		ok, err := f.waiter.SetNX(ctx, f.key, "w", 30*time.Second).Result()
		at = time.Now()
		if err == nil && !ok {
			err = errors.New("floor: key exists")
		}
		done <- err
	}()
	time.Sleep(hold)
	t0 := time.Now()
	if err := f.holder.Publish(ctx, f.channel, "1").Err(); err != nil {
		return 0, fmt.Errorf("floor publish: %w", err)
	}
	if err := <-done; err != nil {
		return 0, err
	}
	if err := f.waiter.Del(ctx, f.key).Err(); err != nil {
		return 0, fmt.Errorf("floor del: %w", err)
	}
	return at.Sub(t0), nil
}

// ping times a PING sent after an idle hold.
func (f *pushFloor) ping(ctx context.Context, hold time.Duration) (time.Duration, error) {
	time.Sleep(hold)
	t0 := time.Now()
	if err := f.holder.Ping(ctx).Err(); err != nil {
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

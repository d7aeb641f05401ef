package locktest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// readOnly is the reply of a replica to a write: go-redis sends the
// command again on it (its shouldRetry), so a caller that gets it may be
// looking at the last of several tries.
const readOnly = redistest.Reply("READONLY You can't write against a read only replica.")

// retriedReply is a go-redis hook that, once armed, lets the next lock
// command (a script other than a renewal, or a mutex's SET) run at Redis
// and gives its caller a READONLY refusal instead of the reply: what
// go-redis returns when a try's reply was lost (the connection cut by a
// failover) and its retry reached the old master, now a replica.
type retriedReply struct {
	armed, fired atomic.Bool
}

func (r *retriedReply) arm() { r.fired.Store(false); r.armed.Store(true) }

func (r *retriedReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *retriedReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		lockCmd := (redistest.IsScript(cmd.Name()) && !renewal(cmd)) || strings.EqualFold(cmd.Name(), "set")
		if !lockCmd || !r.armed.Load() {
			return next(ctx, cmd)
		}
		// Only a command that ran: a function unknown to the server
		// (miniredis) is sent again as a script, which then counts.
		if err := next(ctx, cmd); err != nil || !r.armed.CompareAndSwap(true, false) {
			return err
		}
		r.fired.Store(true)
		cmd.SetErr(readOnly)
		return readOnly
	}
}

func (r *retriedReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// RetriedReply: a lock call whose reply is a refusal that go-redis sends
// the command again on (READONLY, LOADING...) does not take it as "not
// run": an earlier try, whose reply was lost, may have run. A Lock that
// ran at Redis and got READONLY gives its grant back (another handle gets
// the lock at once, not after a lease); an Unlock that ran and got
// READONLY says the outcome is unknown, and the next Unlock resends it
// and finds it applied.
func RetriedReply(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		hook := &retriedReply{}
		rdb := s.Client(t)
		redistest.AddHook(rdb, hook)
		c := relock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		h := k.New(c, name)

		hook.arm()
		err := h.Lock(ctx)
		require.True(t, hook.fired.Load(), "no lock command ran: nothing was tested")
		require.Error(t, err, "a Lock whose last reply was READONLY")
		assert.Contains(t, err.Error(), "READONLY")
		assert.False(t, h.Held())

		// The grant that ran was given back: another Client's handle
		// gets the lock at once (the acquire's lease is the watchdog's,
		// 30 s by default).
		other := relock.New(s.Client(t))
		t.Cleanup(func() { _ = other.Close() })
		o := k.waiter(other, name)
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = o.Lock(octx)
		cancel()
		require.NoError(t, err, "the grant of a Lock that got READONLY was left at Redis")
		require.NoError(t, o.Unlock(ctx))

		require.NoError(t, h.Lock(ctx))
		hook.arm()
		err = h.Unlock(ctx)
		require.True(t, hook.fired.Load(), "no release ran: nothing was tested")
		require.Error(t, err, "an Unlock whose last reply was READONLY")
		assert.Contains(t, err.Error(), "outcome unknown")
		assert.NotErrorIs(t, err, relock.ErrNotHeld, "the outcome is unknown, not a loss")
		require.NoError(t, h.Unlock(ctx), "the resent release finds it applied")
		assert.ErrorIs(t, h.Unlock(ctx), relock.ErrNotHeld, "one Unlock too many")
		assert.Empty(t, leftKeys(t, s, k, name), "keys left after every holder and waiter is gone")
	})
}

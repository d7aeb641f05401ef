package locktest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Guarded: a handle's Run runs the caller's script only while the handle
// holds the lock at Redis. A stale holder (its lock deleted and taken by
// another owner before it could know: a holder paused past its lease) has
// its write refused, with ErrNotHeld and ErrLockGone, and loses its hold;
// the new owner's write runs. The script sees only its own keys and
// arguments, its errors come back as they are, a handle that holds
// nothing (or is past its local deadline) sends nothing, and on a Cluster
// a key outside the lock's slot is refused.
func Guarded(t *testing.T, k Kind) {
	if k.Mode == "read" {
		t.Skip("a guarded write needs the write lock (rwlock's tests check a reader is refused)")
	}
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s) // renewals every 10 s: a deletion goes unnoticed
		admin := s.Admin(t)
		name := redistest.Name(t)
		stock := "stock:{" + name + "}" // in the lock's slot
		require.NoError(t, admin.Set(ctx, stock, 10, time.Minute).Err())
		take := relock.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < tonumber(ARGV[1]) then return -1 end
return redis.call('DECRBY', KEYS[1], ARGV[1])`)
		left := func() int { n, _ := admin.Get(ctx, stock).Int(); return n }

		a, b := k.New(c, name), k.waiter(c, name)
		assert.ErrorIs(t, a.Run(ctx, take, []string{stock}, 1).Err(), relock.ErrNotHeld, "before Lock")
		assert.ErrorIs(t, a.Run(ctx, nil, []string{stock}, 1).Err(), relock.ErrInvalidOption, "a nil script")
		require.NoError(t, a.Lock(ctx))
		n, err := a.Run(ctx, take, []string{stock}, 3).Int64()
		require.NoError(t, err)
		assert.Equal(t, int64(7), n)
		mine, err := a.Run(ctx, relock.NewScript(`return {#KEYS, #ARGV, ARGV[1]}`), []string{stock}, "x").Slice()
		require.NoError(t, err)
		assert.Equal(t, []any{int64(1), int64(1), "x"}, mine, "the script sees its own KEYS and ARGV only")
		cmd := a.Run(ctx, take, []string{stock}, 0)
		require.NoError(t, cmd.Err())
		assert.NotContains(t, cmd.String()+fmt.Sprint(cmd.Args()), a.Token(), "the owner token in Run's command")
		err = a.Run(ctx, relock.NewScript(`return redis.error_reply('MYERR oops')`), nil).Err()
		assert.ErrorContains(t, err, "MYERR oops", "the script's own error")
		assert.NotErrorIs(t, err, relock.ErrNotHeld)
		assert.True(t, a.Held())

		// a becomes a stale holder: its lock is deleted and b takes it.
		deleteLock(t, s, name)
		require.NoError(t, b.Lock(ctx))
		err = a.Run(ctx, take, []string{stock}, 1).Err()
		assert.ErrorIs(t, err, relock.ErrNotHeld, "a stale holder's write")
		assert.ErrorIs(t, err, relock.ErrLockGone)
		assert.Equal(t, 7, left(), "a stale holder wrote")
		select {
		case <-a.Lost():
		default:
			t.Error("a refused guarded write did not report the loss")
		}
		n, err = b.Run(ctx, take, []string{stock}, 2).Int64()
		require.NoError(t, err, "the new owner's write")
		assert.Equal(t, int64(5), n)
		assert.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
		if s.Cluster != nil {
			err := b.Run(ctx, take, []string{"stock:{" + name + ".elsewhere}"}, 1).Err()
			assert.ErrorIs(t, err, relock.ErrInvalidOption, "a key outside the lock's slot")
		}
		require.NoError(t, b.Unlock(ctx))
		assert.ErrorIs(t, b.Run(ctx, take, []string{stock}, 1).Err(), relock.ErrNotHeld, "after Unlock")

		// Past its local deadline: sent nothing.
		p := k.New(c, name, relock.WithLease(100*time.Millisecond))
		require.NoError(t, p.Lock(ctx))
		time.Sleep(150 * time.Millisecond)
		err = p.Run(ctx, take, []string{stock}, 1).Err()
		assert.ErrorIs(t, err, relock.ErrNotHeld, "past the local deadline")
		assert.ErrorIs(t, err, relock.ErrLeaseExpired, "past the local deadline")
		// In the words of the loss that Lost reports (a fixed lease).
		assert.ErrorContains(t, err, "lease ran out")
		assert.Equal(t, 5, left())
	})
}

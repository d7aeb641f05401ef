package redlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/redlock"
)

// newToken returns a random owner token for relock.WithToken.
func newToken(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Token and Fingerprint; WithToken refuses tokens too short, too long or
// of other characters (without showing them) before touching a master;
// a handle made with a token has it.
func TestTokens(t *testing.T) {
	redistest.Parallel(t)
	ctx := context.Background()
	ms := startMinis(t, 3)
	cs := ms.clients(t)
	name := redistest.Name(t)
	m := redlock.New(cs, name)
	assert.Len(t, m.Token(), 32, "a random token: 128 bits in hex")
	assert.Equal(t, core.Fingerprint(m.Token()), m.Fingerprint())
	assert.Len(t, m.Fingerprint(), 8)
	assert.NotEqual(t, m.Token(), redlock.New(cs, name).Token())

	for _, bad := range []string{"", "0123456789abcde", strings.Repeat("a", 129),
		"0123456789abcdef:1", "0123456789abcdef|x", "0123456789 abcdef", "0123456789{abcdef}"} {
		b := redlock.New(cs, name, relock.WithToken(bad))
		ok, terr := b.TryLock(ctx)
		assert.False(t, ok)
		for _, err := range []error{b.Lock(ctx), terr, b.LockFor(ctx, time.Second), b.Resume(ctx),
			b.Extend(ctx, time.Second), b.Unlock(ctx)} {
			assert.ErrorIs(t, err, relock.ErrInvalidOption, "token %q", bad)
			if bad != "" {
				assert.NotContains(t, err.Error(), bad, "the error shows the token")
			}
		}
		assert.ErrorIs(t, context.Cause(b.HoldContext(ctx)), relock.ErrNotHeld)
	}
	for i := range ms {
		assert.Empty(t, ms[i].mini.Keys(), "a refused handle wrote something on master %d", i)
	}
	tok := newToken("job-")
	assert.Equal(t, tok, redlock.New(cs, name, relock.WithToken(tok)).Token())
}

// Two handles of one token share each master's request record: their
// request ids differ, so that one never takes a record of the other's for
// its own. (With the same ids, the Unlock of a hold whose keys were
// deleted would find the other handle's release there, and report a
// success.)
func TestSharedTokenRequestIDs(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		tok := newToken("shared-")
		a := redlock.New(ms.clients(t), name, relock.WithToken(tok))
		b := redlock.New(ms.clients(t), name, relock.WithToken(tok))
		ok, err := a.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, a.Unlock(ctx))
		ms.clean(t, name)

		// b's requests: the same count as a's.
		ok, err = b.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)
		ms.unplant(t, name, 0, 1, 2, 3, 4)
		err = b.Unlock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "the unlock of a deleted hold")
		assert.ErrorIs(t, err, relock.ErrLockGone)
	})
}

// A worker resumes the hold of a dispatcher's handle of its token, on
// Clients of its own, after the dispatcher's Clients were closed: it
// renews it, another owner cannot take it, and the worker releases it.
// Resume fails with ErrNotHeld (adopting nothing) when the token holds
// nothing or only a minority of the parts, and with ErrAlreadyHeld on a
// handle that holds the lock.
func TestResume(t *testing.T) {
	redistest.Parallel(t)
	run(t, func(t *testing.T, ms masters) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 600 * time.Millisecond
		tok := newToken("worker-")
		// The first script call on the masters (miniredis compiles it, under
		// -race) on a handle whose attempts may take a second: 600 ms
		// leases give 100 ms, which CI32 saw run out on 3 of 5 masters.
		first := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(10*time.Second)), name, relock.WithToken(tok))
		err := first.Resume(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "nothing to resume")
		assert.NotContains(t, err.Error(), tok)
		assert.False(t, first.Held())
		assert.Empty(t, ms.holders(t, name), "a Resume of nothing wrote something")
		w := redlock.New(ms.clients(t, relock.WithWatchdogTimeout(lease)), name, relock.WithToken(tok))

		dcs := ms.clients(t, relock.WithWatchdogTimeout(1500*time.Millisecond))
		d := redlock.New(dcs, name, relock.WithToken(tok))
		lock(t, d)
		assert.Len(t, ms.holdersSoon(t, name, []int{0, 1, 2, 3, 4}), 5)
		// The dispatcher's process goes away: its Clients are closed, its
		// hold is no longer renewed, its keys still there.
		for _, c := range dcs {
			require.NoError(t, c.Close())
		}
		within(t, d.Lost(), time.Second, "the dispatcher's Lost")

		require.NoError(t, w.Resume(ctx), "the worker resumes the hold")
		assert.True(t, w.Held())
		assert.ErrorIs(t, w.Resume(ctx), relock.ErrAlreadyHeld)
		hc := w.HoldContext(ctx)
		time.Sleep(3 * lease) // renewed by the worker's watchdogs
		assert.NoError(t, w.LostErr(), "the resumed hold was not renewed")
		assert.NoError(t, hc.Err())
		ms.allWithin(t, name, 0, lease, "the resumed hold")
		other := redlock.New(ms.clients(t), name)
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "another owner got a resumed hold")
		require.NoError(t, w.Unlock(ctx))
		assert.ErrorIs(t, hc.Err(), context.Canceled)
		assert.ErrorIs(t, w.Unlock(ctx), relock.ErrNotHeld, "one Unlock too many")
		ms.clean(t, name)
		lock(t, other)
		assert.ErrorIs(t, w.Resume(ctx), relock.ErrNotHeld, "the token holds nothing: another owner does")
		require.NoError(t, other.Unlock(ctx))
		ms.clean(t, name)

		// The token's parts on a minority of masters: nothing adopted,
		// and they are left to their lease.
		for _, i := range []int{0, 1} {
			require.NoError(t, ms[i].admin.Set(ctx, key(name), tok, time.Minute).Err())
		}
		err = w.Resume(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld, "a minority resumed")
		assert.Contains(t, err.Error(), "3 needed")
		assert.False(t, w.Held())
		assert.Nil(t, w.LostErr())
		assert.Equal(t, []int{0, 1}, ms.holders(t, name))
		ms.unplant(t, name, 0, 1)

		// A fixed lease runs on from where it is: the hold is lost when
		// the dispatcher's lease ends.
		dcs = ms.clients(t)
		d = redlock.New(dcs, name, relock.WithToken(tok))
		start := time.Now()
		require.NoError(t, d.LockFor(ctx, 1500*time.Millisecond))
		for _, c := range dcs {
			require.NoError(t, c.Close())
		}
		f := redlock.New(ms.clients(t), name, relock.WithToken(tok), relock.WithLease(time.Minute))
		require.NoError(t, f.Resume(ctx))
		ms.allWithin(t, name, 0, 1500*time.Millisecond, "a resumed fixed lease")
		within(t, f.Lost(), 3*time.Second, "Lost when the resumed lease ended")
		assert.Less(t, time.Since(start), 2*time.Second, "the resumed lease was lengthened")
		assert.ErrorIs(t, f.LostErr(), relock.ErrLeaseExpired)
		assert.ErrorIs(t, f.Unlock(ctx), relock.ErrNotHeld)
		ms.clean(t, name)
	})
}

package locktest

import (
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
)

// Tokens: Token and Fingerprint; WithToken refuses tokens too short, too
// long or of other characters (without showing them), before touching
// Redis; a handle made with a token has it.
func Tokens(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		h := k.New(c, name)
		assert.Len(t, h.Token(), 32, "a random token: 128 bits in hex")
		assert.Equal(t, core.Fingerprint(h.Token()), h.Fingerprint())
		assert.Len(t, h.Fingerprint(), 8)
		assert.NotEqual(t, h.Token(), k.New(c, name).Token())

		for _, bad := range []string{"", "0123456789abcde", strings.Repeat("a", 129),
			"0123456789abcdef:1", "0123456789abcdef|x", "0123456789 abcdef", "0123456789{abcdef}"} {
			b := k.New(c, name, relock.WithToken(bad))
			for _, err := range []error{b.Lock(ctx), b.Resume(ctx), b.Extend(ctx, time.Second)} {
				assert.ErrorIs(t, err, relock.ErrInvalidOption, "token %q", bad)
				if bad != "" {
					assert.NotContains(t, err.Error(), bad, "the error shows the token")
				}
			}
		}
		assert.Empty(t, s.Keys(t, "*{"+name+"}*"), "a refused handle wrote something")
		tok := "job-7f3a9c-" + strings.Repeat("x", 21)
		assert.Equal(t, tok, k.New(c, name, relock.WithToken(tok)).Token())
	})
}

// Resume: a handle made with another handle's token (another process, or
// after a restart) adopts its hold, with its re-entry count and fencing
// token, renews it, and releases it; Resume fails with ErrNotHeld when the
// token holds nothing (writing nothing), and with ErrAlreadyHeld on a
// handle that holds the lock.
func Resume(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const lease = 600 * time.Millisecond
		dispatcher, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		worker, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		var b [16]byte
		_, _ = rand.Read(b[:])
		tok := "worker-" + hex.EncodeToString(b[:])

		w := k.New(worker, name, relock.WithToken(tok), relock.WithFencing())
		assert.ErrorIs(t, w.Resume(ctx), relock.ErrNotHeld, "nothing to resume")
		assert.False(t, w.Held())
		assert.Empty(t, s.Keys(t, "*{"+name+"}*"), "a Resume of nothing wrote something")

		d := k.New(dispatcher, name, relock.WithToken(tok), relock.WithFencing())
		require.NoError(t, d.Lock(ctx))
		depth := 1
		if k.Reentrant {
			require.NoError(t, d.Lock(ctx))
			depth = 2
		}
		fence := d.Fence()
		// The dispatcher's process goes away: its Client is closed, its
		// hold is no longer renewed, its key still there.
		require.NoError(t, dispatcher.Close())
		<-d.Lost()

		require.NoError(t, w.Resume(ctx), "the worker resumes the hold")
		assert.True(t, w.Held())
		assert.Equal(t, fence, w.Fence(), "the fencing token is the hold's")
		assert.ErrorIs(t, w.Resume(ctx), relock.ErrAlreadyHeld)
		time.Sleep(2 * lease) // past its lease: renewed by the worker's watchdog
		assert.NoError(t, w.LostErr(), "the resumed hold was not renewed")
		other := k.waiter(worker, name)
		ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "another owner got a resumed hold")
		assert.NoError(t, w.HoldContext(ctx).Err())
		for i := 0; i < depth; i++ {
			require.NoError(t, w.Unlock(ctx), "the resumed hold's unlock %d of %d", i+1, depth)
		}
		assert.ErrorIs(t, w.Unlock(ctx), relock.ErrNotHeld, "one Unlock too many")
		ok, err = other.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the lock is held after the resumed hold's release")
		assert.ErrorIs(t, w.Resume(ctx), relock.ErrNotHeld, "the token holds nothing: another owner does")
		require.NoError(t, other.Unlock(ctx))
	})
}

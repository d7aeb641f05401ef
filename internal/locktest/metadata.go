package locktest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Metadata: what a handle gives with WithMetadata is what Holders shows of
// it to anybody, from its first attempt (a mutex's SET NX too), through a
// grant pushed by a release, renewals, re-entries and Resume, with
// fencing; it goes with the hold. Too long is refused.
func Metadata(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		const lease = 600 * time.Millisecond
		c, _ := redistest.NewClient(t, s, relock.WithWatchdogTimeout(lease))
		name := redistest.Name(t)
		viewer := k.New(c, name) // holds nothing: anybody may look
		long := k.New(c, name, relock.WithMetadata(strings.Repeat("x", 257)))
		assert.ErrorIs(t, long.Lock(ctx), relock.ErrInvalidOption, "metadata of 257 bytes")

		hs, err := viewer.Holders(ctx)
		require.NoError(t, err)
		assert.Empty(t, hs, "holders of a free lock")

		// Separators of relock's own encodings in the metadata.
		const meta = "web-3 pid 4711 | job:7 ✓"
		h := k.New(c, name, relock.WithMetadata(meta), relock.WithFencing())
		depth := lockDepth(t, k, h)
		hs, err = viewer.Holders(ctx)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		assert.Equal(t, h.Fingerprint(), hs[0].Fingerprint)
		assert.Equal(t, meta, hs[0].Metadata)
		assert.Equal(t, depth, hs[0].Count)
		assert.Positive(t, hs[0].Lease)
		assert.LessOrEqual(t, hs[0].Lease, lease)
		time.Sleep(2 * lease) // renewals keep the hold, and its metadata
		require.NoError(t, h.LostErr())
		hs, err = viewer.Holders(ctx)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		assert.Equal(t, meta, hs[0].Metadata, "after renewals")

		// Resumed by another handle of the token: the same metadata.
		r := k.New(c, name, relock.WithToken(h.Token()), relock.WithFencing())
		require.NoError(t, r.Resume(ctx))
		assert.Equal(t, h.Fence(), r.Fence())

		// A waiter with metadata that the release hands the lock to.
		w := k.waiter(c, name, relock.WithMetadata("waiter"))
		waits := lockAsync(ctx, w)
		time.Sleep(queued)
		for i := 0; i < depth; i++ {
			require.NoError(t, r.Unlock(ctx))
		}
		require.NoError(t, await(t, waits, 5*time.Second, "the waiter's Lock"))
		hs, err = viewer.Holders(ctx)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		assert.Equal(t, w.Fingerprint(), hs[0].Fingerprint)
		assert.Equal(t, "waiter", hs[0].Metadata)
		require.NoError(t, w.Unlock(ctx))
		hs, err = viewer.Holders(ctx)
		require.NoError(t, err)
		assert.Empty(t, hs)
		assert.Empty(t, s.Keys(t, "relock:*{"+name+"}"), "the lock is left after its unlocks")
	})
}

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

// RecordsSwept: an uncontended cycle whose replies all came leaves no key
// behind. A release keeps its request record (so that its resend after a
// lost reply answers as the first run did) only until the handle has the
// reply; then the Client deletes it within a sweep (core.SweepInterval),
// and Close deletes the records still due. That holds for new handles
// (one per request, the documented pattern), for fencing tokens (whose
// acquire keeps a record too), for a re-entered hold, and for a fixed
// lease (whose record gets its own TTL).
func RecordsSwept(t *testing.T, k Kind) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := testCtx(t)
		rdb := s.Client(t)
		sweeps := &redistest.Counter{}
		redistest.AddHook(rdb, sweeps)
		c := relock.New(rdb)
		defer c.Close()
		name := redistest.Name(t)
		// left returns the test's keys but those k keeps. It runs in the
		// conditions of Eventually, whose goroutine may outlive t: no t
		// in it (a failed scan is a key left, named by its error).
		left := func() []string {
			found, err := s.ScanKeys("relock:*" + name + "*")
			if err != nil {
				return []string{"(scan: " + err.Error() + ")"}
			}
			var keys []string
			for _, key := range found {
				if keeps(k, key) {
					continue
				}
				keys = append(keys, key)
			}
			return keys
		}

		// The record is there right after the release: a lost reply
		// would find it.
		h := k.New(c, name)
		require.NoError(t, h.Lock(ctx))
		require.NoError(t, h.Unlock(ctx))
		if keys := left(); !hasRecord(keys) {
			// Unless the Client swept it already: the sweep comes 100 ms
			// after the release, sooner than a loaded machine may run
			// this goroutine again.
			assert.Positive(t, sweeps.Sweeps(), "no request record right after the release, and none swept: %v", keys)
		}
		require.Eventually(t, func() bool { return len(left()) == 0 }, 5*time.Second, 20*time.Millisecond,
			"keys left after an uncontended cycle: %v", left())

		for i := 0; i < 20; i++ {
			h := k.New(c, name)
			require.NoError(t, h.Lock(ctx))
			require.NoError(t, h.Unlock(ctx))
		}
		f := k.New(c, name, relock.WithFencing())
		require.NoError(t, f.Lock(ctx))
		if k.Type != "semaphore" && k.Mode != "read" { // they have no fencing token
			assert.Positive(t, f.Fence())
		}
		require.NoError(t, f.Unlock(ctx))
		l := k.New(c, name)
		require.NoError(t, l.LockFor(ctx, time.Minute))
		require.NoError(t, l.Unlock(ctx))
		if k.Reentrant {
			r := k.New(c, name)
			require.NoError(t, r.Lock(ctx))
			require.NoError(t, r.Lock(ctx))
			require.NoError(t, r.Unlock(ctx))
			require.NoError(t, r.Unlock(ctx))
		}
		require.Eventually(t, func() bool { return len(left()) == 0 }, 5*time.Second, 20*time.Millisecond,
			"keys left after uncontended cycles: %v", left())

		// Close deletes what is due at once.
		h = k.New(c, name)
		require.NoError(t, h.Lock(ctx))
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, c.Close())
		assert.Empty(t, left(), "keys left after Close")
	})
}

// keeps reports whether key is one that k keeps after its holders and
// waiters are gone (Kind.Keeps), or a fencing counter.
func keeps(k Kind, key string) bool {
	if strings.HasSuffix(key, "}:fence") {
		return true
	}
	for _, suffix := range k.Keeps {
		if strings.HasSuffix(key, "}"+suffix) {
			return true
		}
	}
	return false
}

// hasRecord reports whether keys holds a request record.
func hasRecord(keys []string) bool {
	for _, key := range keys {
		if strings.Contains(key, "}:r:") {
			return true
		}
	}
	return false
}

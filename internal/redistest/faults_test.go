package redistest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// TestFaultsLoseReplies: in lose-replies mode a command runs and its
// caller is told it failed, also when it opens the client's connection
// (go-redis 9.23 sends that connection's HELLO through the hooks: losing
// its reply failed the command unsent, and TestMultiLockUnlockRetried
// found a release not applied).
func TestFaultsLoseReplies(t *testing.T) {
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		f := &redistest.Faults{}
		redistest.AddHook(rdb, f)
		f.LoseReplies(true)
		key := redistest.Name(t)
		require.ErrorIs(t, rdb.Set(ctx, key, "v", 0).Err(), redistest.ErrInjected)
		assert.Empty(t, f.Hidden(), "the command failed by itself")
		assert.Equal(t, "v", s.Admin(t).Get(ctx, key).Val(), "the command whose reply was lost ran")
		f.LoseReplies(false)
		require.NoError(t, rdb.Del(ctx, key).Err())
	})
}

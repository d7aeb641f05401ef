package redistest_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestCluster: the shared cluster has three masters with one replica
// each, and keys spread over the masters.
func TestCluster(t *testing.T) {
	c := redistest.RealCluster(t)
	ctx := context.Background()
	rdb := c.Client(t)
	masters := map[string]bool{}
	var mu sync.Mutex // ForEachMaster calls f concurrently
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters[m.Options().Addr] = true
		return nil
	}))
	assert.Len(t, masters, 3)
	used := map[string]bool{}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("relock-test:{%d}", i)
		require.NoError(t, rdb.Set(ctx, key, 1, 0).Err())
		m, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		used[m.Options().Addr] = true
	}
	assert.Len(t, used, 3, "30 keys on fewer than 3 masters")
}

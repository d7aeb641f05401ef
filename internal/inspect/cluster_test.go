package inspect_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/inspect"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
)

// TestReadDuringMigration: a lock whose slot is being migrated between two
// masters (marked migrating, none of its keys moved yet: Redis refuses the
// snapshot script with TRYAGAIN) is read once the migration ends, not
// reported as an error.
func TestReadDuringMigration(t *testing.T) {
	redistest.Parallel(t)
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := cl.Client(t)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	a, b := cl.Nodes[0], cl.Nodes[1]
	base := redistest.Name(t)
	var name, key string
	for i := 0; ; i++ {
		name = base + "." + strconv.Itoa(i)
		key = "relock:mutex:{" + name + "}"
		m, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		if m.Options().Addr == a.Addr {
			break
		}
	}
	m := mutex.New(c, name)
	require.NoError(t, m.Lock(ctx))
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)

	require.NoError(t, redistest.BeginMigration(ctx, slot, a, b))
	type result struct {
		locks []inspect.Lock
		err   error
	}
	done := make(chan result, 1)
	go func() {
		locks, err := inspect.Read(ctx, rdb, []inspect.Ref{{Kind: "mutex", Name: name}})
		done <- result{locks, err}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Read returned while the slot was migrating: %v, %v", r.locks, r.err)
	default:
	}
	require.NoError(t, redistest.FinishMigration(ctx, slot, a, b, 0))
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Read never returned after the migration")
	}
	require.NoError(t, r.err)
	require.Len(t, r.locks, 1)
	assert.True(t, r.locks[0].Held)
	require.NoError(t, m.Unlock(ctx))
}

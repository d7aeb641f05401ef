package rwlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
)

// TestRenewalsWhileSlotMigrates: a slot stays marked migrating for longer
// than a lease, no key moved. A solo read/write lock's renewal declares
// its owners' sorted set, which does not exist, so Redis refuses it for
// the whole move (a known limit, see docs/design.md); it must not take
// with it a reentrant hold of the same Client in the same slot (renewed
// at the source all along), and the watchdog's resending of the refused
// renewal must not stop it from claiming, meanwhile, a lock a release
// handed to one of its waiters on another slot (whose claim lease, 1 s,
// is far shorter than the move).
func TestRenewalsWhileSlotMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis Cluster of its own")
	}
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	admin := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := cl.Nodes[0], cl.Nodes[1]
	base := redistest.Name(t)
	// Two names of slots that master a serves: one to migrate, one not.
	var names []string
	var slots []int64
	for i := 0; len(names) < 2; i++ {
		name := base + "." + strconv.Itoa(i)
		m, err := admin.MasterForKey(ctx, "relock:rwlock:{"+name+"}")
		require.NoError(t, err)
		slot, err := admin.ClusterKeySlot(ctx, "relock:rwlock:{"+name+"}").Result()
		require.NoError(t, err)
		if m.Options().Addr != a.Addr || (len(slots) == 1 && slot == slots[0]) {
			continue
		}
		names, slots = append(names, name), append(slots, slot)
	}
	moving, settled := names[0], names[1]

	c := relock.New(cl.Client(t), relock.WithWatchdogTimeout(3*time.Second)) // renewals every second
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(cl.Client(t))
	t.Cleanup(func() { _ = other.Close() })
	rw := rwlock.New(c, moving)
	require.NoError(t, rw.RLock(ctx)) // solo
	re := reentrant.New(c, moving)    // "relock:reentrant:{<moving>}": the same slot
	require.NoError(t, re.Lock(ctx))
	holder := mutex.New(other, settled)
	require.NoError(t, holder.Lock(ctx))

	require.NoError(t, redistest.BeginMigration(ctx, slots[0], a, b))
	migrated := false
	t.Cleanup(func() {
		if !migrated {
			_ = redistest.FinishMigration(context.Background(), slots[0], a, b, 0)
		}
	})
	w := mutex.New(c, settled, relock.WithHeartbeat(2*time.Second)) // claim lease 1 s (500 ms lapsed on a loaded machine)
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	time.Sleep(1500 * time.Millisecond)    // past a refused round: its renewals are being resent
	require.NoError(t, holder.Unlock(ctx)) // hands the lock to w
	require.NoError(t, <-got)
	time.Sleep(3 * time.Second) // a lease: the slot still migrating
	assert.NoError(t, w.LostErr(), "a hold handed over on a settled slot was lost while renewals of a migrating one were resent")
	assert.NoError(t, re.LostErr(), "a hold of the migrating slot, renewed at its source, was lost with a refused solo rwlock renewal")
	t.Logf("the solo rwlock hold, refused for the whole move: lost=%v", rw.LostErr())

	require.NoError(t, redistest.FinishMigration(ctx, slots[0], a, b, 0))
	migrated = true
	require.NoError(t, re.Unlock(ctx))
	require.NoError(t, w.Unlock(ctx))
	_ = rw.RUnlock(ctx)
}

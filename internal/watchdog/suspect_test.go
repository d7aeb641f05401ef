package watchdog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// TestStaleAskIsNoLoss: while a slot migrates, go-redis may run a renewal
// at the importing master with ASKING although the lock is still at the
// source (it follows an ASK after the slot had moved back and begun to
// move again; the Cluster resharding test lost a hold that way, its lock
// alive at the source). There the renewal finds nothing and answers 0.
// That answer must not end the hold: the watchdog asks again, declaring
// the slot's never-created key, which a migrating slot refuses at both
// masters, and the first settled answer decides. A lock really gone is
// still lost, within the round that finds it.
func TestStaleAskIsNoLoss(t *testing.T) {
	redistest.Parallel(t)
	cl := redistest.StartCluster(t, 2, 5*time.Second)
	s := &redistest.Server{Addr: cl.Nodes[0].Addr, Cluster: cl}
	ctx := context.Background()
	a, b := cl.Nodes[0], cl.Nodes[1]
	cc := s.Client(t).(*redis.ClusterClient)

	// A lock key whose slot is on a.
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("relock:mutex:{%s.%d}", redistest.Name(t), i)
		m, err := cc.MasterForKey(ctx, k)
		require.NoError(t, err)
		if m.Options().Addr == a.Addr {
			key = k
		}
	}
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	const lease = 3 * time.Second // renewed every second
	require.NoError(t, cc.Set(ctx, key, "token", lease).Err())

	// Both masters have relock's functions, as they would after a lock
	// call of each of their slots.
	lib, src := scripts.Library()
	for _, n := range []*redistest.ClusterNode{a, b} {
		node := redis.NewClient(&redis.Options{Addr: n.Addr})
		require.NoError(t, node.FunctionLoadReplace(ctx, src).Err(), "loading %s", lib)
		require.NoError(t, node.Close())
	}

	// The next renewal runs at b, with ASKING, as a stale ASK would have
	// it: b imports the slot, the lock is at a.
	stale := &staleAsk{to: b.Addr}
	cc.AddHook(stale)
	require.NoError(t, redistest.BeginMigration(ctx, slot, a, b))
	stale.armed.Store(true)

	w := watchdog.New(cc, lease, nil, nil)
	t.Cleanup(w.Close)
	h := watchdog.NewHold(key, watchdog.KindString, "token")
	h.Absent = key + ":absent"
	require.False(t, w.Add(h, time.Now(), lease, true))
	require.Eventually(t, func() bool { return stale.ran.Load() }, 2*lease, 10*time.Millisecond,
		"no renewal ran at the importing master")
	assert.Equal(t, int64(0), stale.reply.Load(), "the renewal at the importing master did not find the lock gone")

	// Asked again, the renewal is refused while the slot migrates; once
	// the slot has moved, b renews the lock.
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, w.Err(h), "a renewal that ran at the importing master ended the hold")
	require.NoError(t, redistest.FinishMigration(ctx, slot, a, b, 0))
	require.Eventually(t, func() bool {
		return cc.PTTL(ctx, key).Val() > lease-400*time.Millisecond
	}, 2*lease, 10*time.Millisecond, "the lock was not renewed once its slot had moved")
	require.NoError(t, w.Err(h))

	// A lock really gone: lost at the next round, once asked again.
	require.NoError(t, cc.Del(ctx, key).Err())
	deleted := time.Now()
	select {
	case <-h.Lost():
		t.Logf("lost %v after the lock was deleted", time.Since(deleted).Round(time.Millisecond))
	case <-time.After(lease / 3 * 2):
		t.Fatal("a deleted lock was not lost within a renewal period")
	}
	assert.ErrorIs(t, w.Err(h), relock.ErrLockGone)
}

// staleAsk is a hook on a Cluster client that, once armed, sends the
// next renewal (an FCALL, EVALSHA or EVAL of the renew script in a
// pipeline) to the node at to with ASKING in front, as go-redis does when
// it follows an ASK, and gives its reply to the caller.
type staleAsk struct {
	to    string
	armed atomic.Bool
	ran   atomic.Bool
	reply atomic.Int64
}

func (s *staleAsk) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *staleAsk) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (s *staleAsk) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) != 1 || !s.armed.CompareAndSwap(true, false) {
			return next(ctx, cmds)
		}
		cmd, ok := cmds[0].(*redis.Cmd)
		if !ok {
			return next(ctx, cmds)
		}
		node := redis.NewClient(&redis.Options{Addr: s.to})
		defer node.Close()
		p := node.Pipeline()
		p.Do(ctx, "asking")
		at := p.Do(ctx, cmd.Args()...)
		_, _ = p.Exec(ctx)
		if res, err := at.Int64Slice(); err == nil && len(res) == 1 {
			s.reply.Store(res[0])
		} else {
			s.reply.Store(-1)
		}
		cmd.SetVal(at.Val())
		cmd.SetErr(at.Err())
		s.ran.Store(true)
		return at.Err()
	}
}

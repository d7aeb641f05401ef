package watchdog_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/watchdog"
)

// TestNoResendAfterRelease: renewals that a migrating slot refused are
// sent again between rounds (for up to 10 s), but only those of holds
// still renewed. A hold released meanwhile (Remove), or whose release
// could not be confirmed (Remove, then Lapse), gets no renewal after its
// release was called: the resends used to go on, and a lapsed hold's
// renewal, once the slot settled, kept the lock beyond its lease.
func TestNoResendAfterRelease(t *testing.T) {
	redistest.Parallel(t)
	for _, lapse := range []bool{false, true} {
		name := "released"
		if lapse {
			name = "lapsed"
		}
		t.Run(name, func(t *testing.T) {
			// A Cluster client whose every renewal is refused (TRYAGAIN) by
			// a hook; nothing reaches a server.
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{redistest.ClosedAddr(t)}})
			t.Cleanup(func() { _ = cc.Close() })
			refused := &tryAgain{}
			cc.AddHook(refused)
			w := watchdog.New(cc, 900*time.Millisecond, nil, nil) // rounds every 300 ms
			t.Cleanup(w.Close)
			h := watchdog.NewHold("relock:mutex:{"+redistest.Name(t)+"}", watchdog.KindString, "token")
			require.False(t, w.Add(h, time.Now(), 900*time.Millisecond, true))

			// The first round (at 300 ms) is refused, and resent 10 ms later.
			require.Eventually(t, func() bool { return refused.count() >= 2 }, 2*time.Second, time.Millisecond,
				"no refused renewal resent")
			w.Remove(h)
			if lapse {
				require.False(t, w.Lapse(h))
			}
			// A resend or round already on its way may still arrive; then
			// nothing more (resends came 20, 40, 80, 250 ms apart, for
			// 10 s).
			time.Sleep(100 * time.Millisecond)
			after := refused.count()
			time.Sleep(600 * time.Millisecond)
			assert.Equal(t, after, refused.count(), "renewals sent after the release")
		})
	}
}

// tryAgain is a go-redis hook that refuses every command as a migrating
// slot does, and counts them.
type tryAgain struct {
	mu sync.Mutex
	n  int
}

type tryAgainReply string

func (r tryAgainReply) Error() string { return string(r) }
func (tryAgainReply) RedisError()     {}

const refusal = tryAgainReply("TRYAGAIN Multiple keys request during rehashing of slot")

func (r *tryAgain) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *tryAgain) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *tryAgain) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
		cmd.SetErr(refusal)
		return refusal
	}
}

func (r *tryAgain) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		r.mu.Lock()
		r.n += len(cmds)
		r.mu.Unlock()
		for _, cmd := range cmds {
			cmd.SetErr(refusal)
		}
		return refusal
	}
}

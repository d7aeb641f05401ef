package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
)

// TestRenewalFailedSaysWhy: while Redis refuses connections, the
// watchdog's EventRenewalFailed carries the refusal (it carried go-redis
// 9.7's "unexpected type=<nil>" for a pipeline that never got a
// connection; newer go-redis retries the dial until the round's deadline
// and reports that), and the hold is lost at its local deadline.
func TestRenewalFailedSaysWhy(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		d := new(redistest.Refuser)
		rdb := s.Client(t, d.Options)
		failures := make(chan error, 100)
		c := relock.New(rdb, relock.WithWatchdogTimeout(900*time.Millisecond), relock.WithObserver(func(e relock.Event) {
			if e.Type == relock.EventRenewalFailed {
				select {
				case failures <- e.Err:
				default:
				}
			}
		}))
		t.Cleanup(func() { _ = c.Close() })
		m := mutex.New(c, redistest.Name(t))
		require.NoError(t, m.Lock(ctx))
		d.Refuse()
		select {
		case err := <-failures:
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "unexpected type")
			if !errors.Is(err, context.DeadlineExceeded) {
				// go-redis 9.7 reports the refusal; newer releases retry
				// the dial until the round's deadline, and report that.
				assert.Contains(t, err.Error(), "connection refused")
			}
		case <-time.After(3 * time.Second):
			t.Fatal("no EventRenewalFailed while Redis refused connections")
		}
		select {
		case <-m.Lost():
			assert.ErrorIs(t, m.LostErr(), relock.ErrLeaseExpired)
		case <-time.After(3 * time.Second):
			t.Fatal("the hold outlived its local deadline")
		}
		assert.False(t, strings.Contains(fmt.Sprint(m.LostErr()), "unexpected type"), "%v", m.LostErr())
	})
}

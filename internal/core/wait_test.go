package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/core"
)

// TestWaitFor: a holder in its last millisecond (PTTL 0) is waited for a
// millisecond, not the cap; only an unknown remaining lease waits the cap.
func TestWaitFor(t *testing.T) {
	const capWait = time.Second
	for _, tc := range []struct {
		ttl      time.Duration
		min, max time.Duration
	}{
		{0, time.Millisecond, time.Millisecond + time.Millisecond/10},
		{20 * time.Millisecond, 21 * time.Millisecond, 21*time.Millisecond + 2100*time.Microsecond},
		{capWait, capWait, capWait + capWait/10},
		{time.Hour, capWait, capWait + capWait/10},
		{core.Unknown, capWait, capWait + capWait/10},
		{-2 * time.Millisecond, capWait, capWait + capWait/10},
	} {
		for i := 0; i < 100; i++ {
			got := core.WaitFor(tc.ttl, capWait)
			if !assert.True(t, got >= tc.min && got <= tc.max, "WaitFor(%v, %v) = %v, want within [%v, %v]",
				tc.ttl, capWait, got, tc.min, tc.max) {
				break
			}
		}
	}
}

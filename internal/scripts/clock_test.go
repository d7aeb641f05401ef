package scripts_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestClockPerCall: a call reads the server's time once and keeps it for
// the rest of the call (clock.lua), and the next call reads it again: as a
// function (and its Cluster twin, which resets it too) on a real server,
// as a script on miniredis. Two calls 30 ms apart report times at least
// 30 ms apart; a library that kept one call's time for the next fails.
func TestClockPerCall(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		rdb := s.Client(t)
		name := "{" + redistest.Name(t) + "}"
		keys := []string{"relock:election:" + name, "relock:election:" + name + ":log"}
		for _, twin := range []bool{false, true} {
			r := scripts.NewRunner(rdb, twin, nil)
			now := func() int64 {
				res, err := r.Run(ctx, rdb, scripts.ElectionObserve, keys, "").Slice()
				require.NoError(t, err)
				us, err := strconv.ParseInt(res[0].(string), 10, 64)
				require.NoError(t, err)
				return us
			}
			first := now()
			time.Sleep(30 * time.Millisecond)
			second := now()
			assert.GreaterOrEqual(t, second-first, int64(30_000), "µs between two calls 30 ms apart (Cluster twin: %v)", twin)
			assert.Equal(t, s.Real(), r.Functions(), "functions on a real server, scripts on miniredis")
		}
	})
}

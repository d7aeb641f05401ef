package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// NewClient returns a relock.Client on a new go-redis client of s, both
// closed at the end of t.
func NewClient(t testing.TB, s *Server, opts ...relock.Option) (*relock.Client, redis.UniversalClient) {
	t.Helper()
	rdb := s.Client(t)
	c := relock.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c, rdb
}

// StallClient returns a go-redis client that gives up on a reply after
// 100 ms and resends up to 6 times, 150 ms apart: a Stall of 200 ms makes it
// resend commands that the server then runs more than once.
func StallClient(t testing.TB, s *Server) redis.UniversalClient {
	t.Helper()
	return s.Client(t, func(o *redis.Options) {
		o.ReadTimeout = 100 * time.Millisecond
		o.MaxRetries = 6
		o.MinRetryBackoff = 150 * time.Millisecond
		o.MaxRetryBackoff = 150 * time.Millisecond
	})
}

package relock

import (
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/core"
)

// Client is the shared machinery behind every lock made from it: the Redis
// client, one watchdog goroutine that renews all held locks in batches, and
// one pub/sub connection (one per shard on a *redis.Ring) that delivers
// wake-ups to all waiters.
//
// Make one Client per Redis deployment and share it; it is safe for
// concurrent use. A Client must not be copied. Close it when done: holds
// still held are then no longer renewed (they expire within one watchdog
// timeout) and their handles' Lost channels fire.
type Client struct {
	e *core.Engine
}

func init() {
	core.RegisterUnwrap(func(v any) *core.Engine {
		if c, ok := v.(*Client); ok && c != nil {
			return c.e
		}
		return nil
	})
}

// New returns a Client on rdb (a *redis.Client, *redis.ClusterClient,
// *redis.Ring or failover client). It never fails: a nil rdb or an invalid
// option is reported, as an error matching ErrNilClient or
// ErrInvalidOption, by every operation of every lock made from the Client.
// The watchdog goroutine starts now; the pub/sub connection is opened on the
// first wait.
//
// On a *redis.Ring, a lock's keys and wake-ups live on the shard its name
// hashes to, and the Client subscribes on that shard. While a shard is down
// the Ring reroutes keys (which also weakens mutual exclusion: a lock can
// move to another shard), and waiters there fall back on their timers (at
// most a second apart) until it is back; shards added with Ring.SetAddrs
// after New are not followed.
//
// relock does not change rdb's options. go-redis resends a command whose
// reply timed out (MaxRetries); relock's scripts are idempotent per request,
// so such a resend neither double-counts nor fails spuriously.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	cfg := clientConfig{Config: core.Config{WatchdogLease: core.DefaultWatchdogLease}}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &Client{e: core.NewEngine(rdb, cfg.Config, cfg.err)}
}

// Close stops the watchdog and the pub/sub connections. Held locks are not
// released (unlock them first): their handles' Lost channels fire, and
// their keys expire within one lease. Lock calls blocked in a wait return
// an error matching ErrNotObtained and ErrClosed. Close is bounded: it does
// not wait for a renewal round stuck on an unresponsive server (that round
// ends by itself within go-redis's ReadTimeout, and changes nothing of the
// handles). Close does not close the Redis client. It is idempotent.
func (c *Client) Close() error {
	if c == nil || c.e == nil {
		return nil
	}
	return c.e.Close()
}

// Err reports whether the Client is unusable (nil Redis client or invalid
// option), or nil.
func (c *Client) Err() error {
	if c == nil || c.e == nil {
		return ErrNilClient
	}
	return c.e.Err
}

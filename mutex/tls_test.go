package mutex_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
)

// TestTLS runs the mutex through a redis-server that speaks only TLS, with
// a certificate from a throwaway CA that the clients verify: lock and
// unlock, a contended wait woken by a push, watchdog renewals over several
// periods, and the shared operator and hand-off suites (whose waiters are
// woken and granted through the pub/sub connection, over TLS too).
func TestTLS(t *testing.T) {
	redistest.Parallel(t)
	s := redistest.StartTLSServer(t)

	plain := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	assert.Error(t, plain.Ping(context.Background()).Err(), "the TLS-only server answered a plaintext PING")

	redistest.RunOn(t, s, "redis-tls", func(t *testing.T) {
		redistest.Subtest(t, "LockWait", func(t *testing.T) {
			redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, rdb := newClient(t, s)
				require.NotNil(t, rdb.(*redis.Client).Options().TLSConfig)
				wc, _ := newClient(t, s)
				name := redistest.Name(t)
				a, b := mutex.New(c, name), mutex.New(wc, name)

				require.NoError(t, a.Lock(ctx))
				ok, err := b.TryLock(ctx)
				require.NoError(t, err)
				assert.False(t, ok, "a held mutex taken")
				require.NoError(t, a.Unlock(ctx))
				require.NoError(t, b.Lock(ctx))
				require.NoError(t, b.Unlock(ctx))

				// A waiter behind a holder with a 30 s lease: its timer
				// would wake it after about a second.
				require.NoError(t, a.Lock(ctx))
				got := make(chan error, 1)
				go func() { got <- b.Lock(ctx) }()
				time.Sleep(200 * time.Millisecond)
				released := time.Now()
				require.NoError(t, a.Unlock(ctx))
				select {
				case err := <-got:
					require.NoError(t, err)
					assert.Less(t, time.Since(released), 500*time.Millisecond, "the waiter was not woken by a push")
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter never got the lock")
				}
				assert.True(t, b.Held())
				require.NoError(t, b.Unlock(ctx))
				assert.Empty(t, s.Keys(t, "relock:mutex:{"+name+"}"))
			})
		})
		redistest.Subtest(t, "URL", func(t *testing.T) {
			// As docs/operations.md shows: options from a rediss:// URL
			// (TLS, verifying the server's certificate against the
			// system's CAs), with the private CA added; and with credentials, as
			// the user with exactly the documented ACL rules.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool := s.TLS.RootCAs
			require.NoError(t, redistest.SetUser(ctx, s, redistest.ACLLine("relock-tls", "PASSWORD")))
			connect := func(url string) *redis.Client {
				t.Helper()
				opt, err := redis.ParseURL(url)
				require.NoError(t, err)
				require.NotNil(t, opt.TLSConfig, "no TLS for %s", url)
				opt.TLSConfig.RootCAs = pool // only for a private CA
				rdb := redis.NewClient(opt)
				t.Cleanup(func() { _ = rdb.Close() })
				return rdb
			}
			name := redistest.Name(t)
			for _, url := range []string{"rediss://" + s.Addr, "rediss://relock-tls:PASSWORD@" + s.Addr} {
				rdb := connect(url)
				c := relock.New(rdb)
				wc := relock.New(connect(url))
				t.Cleanup(func() { _ = c.Close(); _ = wc.Close() })
				a, b := mutex.New(c, name), mutex.New(wc, name)
				require.NoError(t, a.Lock(ctx), url)
				got := make(chan error, 1)
				go func() { got <- b.Lock(ctx) }()
				time.Sleep(200 * time.Millisecond)
				released := time.Now()
				require.NoError(t, a.Unlock(ctx), url)
				select {
				case err := <-got:
					require.NoError(t, err, url)
					assert.Less(t, time.Since(released), 500*time.Millisecond, "%s: the waiter was not woken by a push", url)
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the waiter never got the lock", url)
				}
				require.NoError(t, b.Unlock(ctx), url)
			}
			log, err := s.Admin(t).ACLLog(ctx, 0).Result()
			require.NoError(t, err)
			for _, e := range log {
				assert.NotEqual(t, "relock-tls", e.Username, "Redis refused the user %s %q", e.Reason, e.Object)
			}

			// Without the private CA the client refuses the server.
			opt, err := redis.ParseURL("rediss://" + s.Addr)
			require.NoError(t, err)
			opt.MaxRetries = -1
			untrusting := redis.NewClient(opt)
			defer untrusting.Close()
			err = untrusting.Ping(ctx).Err()
			var unknown x509.UnknownAuthorityError
			assert.ErrorAs(t, err, &unknown, "a client without the CA: %v", err)
		})
		redistest.Subtest(t, "Renewal", func(t *testing.T) { locktest.Renewal(t, kind) })
		redistest.Subtest(t, "HandOff", func(t *testing.T) { locktest.HandOff(t, kind) })
		redistest.Subtest(t, "Operator", func(t *testing.T) { locktest.Operator(t, kind) })
		redistest.Subtest(t, "Fencing", func(t *testing.T) {
			redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
				ctx := context.Background()
				c, _ := newClient(t, s)
				m := mutex.New(c, redistest.Name(t), relock.WithFencing())
				require.NoError(t, m.Lock(ctx))
				f := m.Fence()
				require.NoError(t, m.Unlock(ctx))
				require.NoError(t, m.Lock(ctx))
				assert.Greater(t, m.Fence(), f)
				require.NoError(t, m.Unlock(ctx))
			})
		})
	})
}

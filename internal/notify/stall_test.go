package notify_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/redistest"
)

// hanging is a server that accepts connections and never answers (a
// stopped process behind a live listen queue, a proxy whose far side
// hangs), until release.
type hanging struct {
	addr     string
	accepted chan struct{} // a value per accepted connection (up to 100)

	l        net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	released bool
}

func newHanging(t testing.TB) *hanging {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hg := &hanging{addr: l.Addr().String(), accepted: make(chan struct{}, 100), l: l}
	hg.wg.Add(1)
	go func() {
		defer hg.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			hg.mu.Lock()
			if hg.released {
				hg.mu.Unlock()
				_ = c.Close()
				continue
			}
			hg.conns = append(hg.conns, c)
			hg.wg.Add(1)
			hg.mu.Unlock()
			go func() {
				defer hg.wg.Done()
				_, _ = io.Copy(io.Discard, c)
			}()
			select {
			case hg.accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(hg.release)
	return hg
}

// release ends every read stuck on the server: it closes its connections
// and stops listening (new connections are refused).
func (hg *hanging) release() {
	hg.mu.Lock()
	if !hg.released {
		hg.released = true
		_ = hg.l.Close()
		for _, c := range hg.conns {
			_ = c.Close()
		}
	}
	hg.mu.Unlock()
	hg.wg.Wait()
}

// hubGoroutines counts the goroutines running the hub's code.
func hubGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/notify.(*Hub)") {
			n++
		}
	}
	return n
}

// channelsOf returns n channels that h puts on shard.
func channelsOf(h *notify.Hub, base, shard string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		ch := fmt.Sprintf("relock:test:{%s.%d}", base, i)
		if h.Shard(ch) == shard {
			out = append(out, ch)
		}
	}
	return out
}

// TestStalledShard: on a Ring whose shard b accepts connections and never
// answers, b's connection hangs in go-redis's handshake (up to its
// ReadTimeout, 3 s by default, or forever with -1) while a second waiter
// subscribes on b too. Nobody else waits for that: a wake-up on the
// healthy shard a arrives at once, Subscribe on a is confirmed at once,
// grants reach their addressee, Subscribe on b returns when its ctx ends,
// and Close returns within its grace. Once b's server lets go, every
// goroutine of the hub exits.
func TestStalledShard(t *testing.T) {
	for _, rt := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("ReadTimeout=%v", rt), func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, s *redistest.Server) {
				redistest.CheckGoroutines(t)
				ctx := context.Background()
				hang := newHanging(t)
				ring := newRing(t, &redis.RingOptions{
					Addrs:              map[string]string{"a": s.Addr, "b": hang.addr},
					HeartbeatFrequency: time.Hour, // b stays up for the Ring
					ReadTimeout:        rt,
				})
				h := notify.New(ring)
				var closeOnce sync.Once
				var closeTook time.Duration
				closeHub := func() {
					closeOnce.Do(func() { closeTook = closeWithin(t, h, ring) })
				}
				t.Cleanup(closeHub)
				base := redistest.Name(t)
				xs := channelsOf(h, base, "a", 3)
				ys := channelsOf(h, base, "b", 3)

				sx, err := h.Subscribe(ctx, xs[0], "")
				require.NoError(t, err)

				// The first waiter of b opens b's connection, which hangs;
				// a second one queues its SUBSCRIBE behind it.
				errs := make(chan error, 2)
				subscribe := func(ch string) {
					go func() {
						s, err := h.Subscribe(ctx, ch, "")
						if s != nil {
							s.Close()
						}
						errs <- err
					}()
				}
				subscribe(ys[0])
				select {
				case <-hang.accepted:
				case <-time.After(2 * time.Second):
					t.Fatal("b's connection was not opened")
				}
				subscribe(ys[1])
				time.Sleep(50 * time.Millisecond)

				// A wake-up on a.
				pub := direct(t, s.Addr)
				start := time.Now()
				require.NoError(t, pub.Publish(ctx, xs[0], notify.WakeOne).Err())
				select {
				case <-sx.C:
				case <-time.After(2 * time.Second):
					t.Fatal("wake-up on the healthy shard not delivered")
				}
				took := time.Since(start)
				t.Logf("wake-up on shard a: %v", took)
				assert.Less(t, took, 100*time.Millisecond, "a wake-up on shard a waited for shard b")

				// Subscribe on a, with a short ctx: confirmed at once.
				sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				start = time.Now()
				sx2, err := h.Subscribe(sctx, xs[1], "")
				took = time.Since(start)
				cancel()
				t.Logf("Subscribe on shard a: %v", took)
				require.NoError(t, err, "Subscribe on shard a")
				assert.Less(t, took, 100*time.Millisecond, "Subscribe on shard a waited for shard b")
				require.NoError(t, pub.Publish(ctx, xs[1], notify.WakeOne).Err())
				assert.True(t, woken(sx2), "wake-up after a Subscribe on shard a not delivered")

				// A grant on a reaches its addressee, and only it.
				g1, err := h.Subscribe(ctx, xs[2], "w1")
				require.NoError(t, err)
				g2, err := h.Subscribe(ctx, xs[2], "w2")
				require.NoError(t, err)
				require.NoError(t, pub.Publish(ctx, xs[2], notify.GrantPrefix+"w2|data").Err())
				require.True(t, woken(g2), "grant on shard a not delivered")
				data, ok := g2.Grant()
				assert.True(t, ok)
				assert.Equal(t, "data", data)
				assert.Empty(t, g1.C, "a grant woke another waiter")
				g1.Close()
				g2.Close()

				// Subscribe on b, with a short ctx: returns when ctx ends.
				sctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				start = time.Now()
				sy, err := h.Subscribe(sctx, ys[2], "")
				took = time.Since(start)
				cancel()
				t.Logf("Subscribe on shard b: %v", took)
				assert.Nil(t, sy)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Less(t, took, 200*time.Millisecond, "Subscribe on shard b outlived its ctx")

				start = time.Now()
				sx.Close()
				sx2.Close()
				assert.Less(t, time.Since(start), 50*time.Millisecond, "Sub.Close waited")

				closeHub()
				t.Logf("Close: %v", closeTook)
				assert.Less(t, closeTook, time.Second, "Close waited for shard b")
				for range 2 {
					select {
					case <-errs:
					case <-time.After(time.Second):
						t.Fatal("a Subscribe on shard b did not return after Close")
					}
				}
				stuck := hubGoroutines()
				t.Logf("hub goroutines stuck on shard b after Close: %d", stuck)
				if rt < 0 {
					assert.Positive(t, stuck, "nothing was stuck on shard b: the test proves nothing")
				}

				// b's server lets go: every goroutine of the hub exits.
				hang.release()
				assert.Eventually(t, func() bool { return hubGoroutines() == 0 }, 5*time.Second, 10*time.Millisecond,
					"hub goroutines left after shard b let go")
			})
		})
	}
}

// closeWithin closes h and returns how long that took. If Close hangs, it
// fails t and closes rdb, which ends go-redis's reads, and so Close.
func closeWithin(t *testing.T, h *notify.Hub, rdb io.Closer) time.Duration {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		_ = h.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Error("Hub.Close hung: closing the go-redis client")
		_ = rdb.Close()
		<-done
	}
	return time.Since(start)
}

// TestStalledServer: on a single server that accepts connections and never
// answers, Subscribe returns when its ctx ends (the connection still
// opening), and Close returns within its grace.
func TestStalledServer(t *testing.T) {
	redistest.CheckGoroutines(t)
	ctx := context.Background()
	hang := newHanging(t)
	rdb := direct(t, hang.addr)
	h := notify.New(rdb)
	for i, d := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond} {
		sctx, cancel := context.WithTimeout(ctx, d)
		start := time.Now()
		s, err := h.Subscribe(sctx, fmt.Sprintf("relock:test:{%s.%d}", redistest.Name(t), i), "")
		took := time.Since(start)
		cancel()
		assert.Nil(t, s)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, d+100*time.Millisecond, "Subscribe outlived its ctx")
	}
	assert.Less(t, closeWithin(t, h, rdb), time.Second, "Close waited for the server")
	hang.release()
	assert.Eventually(t, func() bool { return hubGoroutines() == 0 }, 5*time.Second, 10*time.Millisecond,
		"hub goroutines left after the server let go")
}

package relockotel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
)

// locker is what the scenario needs of every lock type (an rwlock's write
// side).
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Lost() <-chan struct{}
	LostErr() error
}

var lockTypes = []struct {
	kind string
	mode string // relock.lock.mode of Lock and Unlock
	make func(c *relock.Client, name string) locker
}{
	{"mutex", "", func(c *relock.Client, n string) locker { return mutex.New(c, n) }},
	{"reentrant", "", func(c *relock.Client, n string) locker { return reentrant.New(c, n) }},
	{"fair", "", func(c *relock.Client, n string) locker { return fair.New(c, n) }},
	{"rwlock", "write", func(c *relock.Client, n string) locker { return rwlock.New(c, n) }},
}

// fixture is a Client recording into a manual reader, on a Redis client
// whose pipelines (the watchdog's renewals) fail while failing is set.
type fixture struct {
	reader  *sdkmetric.ManualReader
	rdb     *redis.Client
	client  *relock.Client
	failing atomic.Bool
	// renewalFailed receives after each failed renewal round, once the
	// metrics observer (given first) has recorded it.
	renewalFailed chan struct{}
}

func newFixture(t *testing.T, addr string) *fixture {
	t.Helper()
	f := &fixture{reader: sdkmetric.NewManualReader(), renewalFailed: make(chan struct{}, 1)}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f.rdb = newRedisClient(t, addr, &f.failing)
	f.client = relock.New(f.rdb,
		relockotel.WithMetrics(mp),
		// Renewals every 333ms: soon enough for the renewal failures below,
		// late enough for a loaded machine to keep its holds.
		relock.WithWatchdogTimeout(time.Second),
		relock.WithObserver(func(e relock.Event) {
			if e.Type == relock.EventRenewalFailed {
				select {
				case f.renewalFailed <- struct{}{}:
				default:
				}
			}
		}))
	t.Cleanup(func() { _ = f.client.Close() })
	return f
}

// newRedisClient returns a client on addr whose pipelines (the watchdog's
// renewal rounds) fail while failing is set.
func newRedisClient(t *testing.T, addr string, failing *atomic.Bool) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	rdb.AddHook(failPipelines{failing})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// failPipelines fails every pipeline while on is set.
type failPipelines struct{ on *atomic.Bool }

func (failPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h failPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.on.Load() {
			return next(ctx, cmds)
		}
		err := errors.New("injected pipeline failure")
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

func (f *fixture) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	return collect(t, f.reader)
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	return rm
}

// find returns the metric called name, or a zero Metrics.
func find(rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	return metricdata.Metrics{}
}

// sum returns the value of the int64 sum called name at exactly attrs (0
// when there is no such data point).
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m := find(rm, name)
	if m.Data == nil {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	require.Truef(t, ok, "%s is a %T, want an int64 sum", name, m.Data)
	want := attribute.NewSet(attrs...)
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	return 0
}

// hist returns the data point of the histogram called name at exactly
// attrs (a zero one when there is none).
func hist(t *testing.T, rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m := find(rm, name)
	if m.Data == nil {
		return metricdata.HistogramDataPoint[float64]{}
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.Truef(t, ok, "%s is a %T, want a float64 histogram", name, m.Data)
	want := attribute.NewSet(attrs...)
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp
		}
	}
	return metricdata.HistogramDataPoint[float64]{}
}

// attributeSets returns the attributes of every data point of m.
func attributeSets(t *testing.T, m metricdata.Metrics) []attribute.Set {
	t.Helper()
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

func uniqueName(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.ReplaceAll(t.Name(), "/", ".") + "." + hex.EncodeToString(b[:])
}

func typeAttr(kind string) attribute.KeyValue { return attribute.String("relock.lock.type", kind) }

// lockAttrs are the attributes of a lock's acquires and releases.
func lockAttrs(kind, mode string, extra ...attribute.KeyValue) []attribute.KeyValue {
	kv := []attribute.KeyValue{typeAttr(kind)}
	if mode != "" {
		kv = append(kv, attribute.String("relock.lock.mode", mode))
	}
	return append(kv, extra...)
}

var (
	acquired = attribute.String("relock.lock.outcome", "acquired")
	failed   = attribute.String("relock.lock.outcome", "failed")
)

func TestMetrics(t *testing.T) {
	for _, lt := range lockTypes {
		t.Run("kind="+lt.kind, func(t *testing.T) {
			t.Parallel()
			onServers(t, func(t *testing.T, addr string) {
				ctx := context.Background()
				f := newFixture(t, addr)
				name := uniqueName(t)
				a, b := lt.make(f.client, name), lt.make(f.client, name)
				kind := typeAttr(lt.kind)
				held := func(rm metricdata.ResourceMetrics) int64 { return sum(t, rm, "relock.lock.held", kind) }

				// An uncontended hold.
				require.NoError(t, a.Lock(ctx))
				assert.Equal(t, int64(1), held(f.collect(t)), "held while locked")
				require.NoError(t, a.Unlock(ctx))
				rm := f.collect(t)
				assert.Equal(t, int64(1), sum(t, rm, "relock.lock.acquisitions", lockAttrs(lt.kind, lt.mode, acquired)...))
				assert.Equal(t, uint64(1), hist(t, rm, "relock.lock.hold.duration", lockAttrs(lt.kind, lt.mode)...).Count)
				assert.Equal(t, int64(0), held(rm), "held after unlock")

				// A Lock that waits for the holder's unlock, made 100ms after
				// b was seen waiting (see unlockAfterWaiter).
				require.NoError(t, a.Lock(ctx))
				unlocked := unlockAfterWaiter(t, f.rdb, name, 100*time.Millisecond, func() error { return a.Unlock(ctx) })
				require.NoError(t, b.Lock(ctx))
				require.NoError(t, <-unlocked)
				require.NoError(t, b.Unlock(ctx))
				rm = f.collect(t)
				wait := hist(t, rm, "relock.lock.wait.duration", lockAttrs(lt.kind, lt.mode, acquired)...)
				assert.Equal(t, uint64(3), wait.Count, "waits recorded")
				maxWait, _ := wait.Max.Value()
				assert.GreaterOrEqual(t, maxWait, 0.1, "longest wait (s)")
				assert.GreaterOrEqual(t, wait.Sum, 0.1, "wait sum (s)")
				assert.Equal(t, int64(3), sum(t, rm, "relock.lock.acquisitions", lockAttrs(lt.kind, lt.mode, acquired)...))
				assert.Equal(t, int64(0), held(rm), "held after the waiter's unlock")

				// A Lock whose ctx ends while the lock is held elsewhere.
				require.NoError(t, a.Lock(ctx))
				noWaiter(t, f.rdb, name)
				tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				deadline, _ := tctx.Deadline()
				stop := watchWaiter(f.rdb, name)
				err := b.Lock(tctx)
				cancel()
				// b's call began before it was seen waiting, and failed at its
				// deadline or later.
				atLeast := waitedAtLeast(t, deadline, stop).Seconds()
				require.ErrorIs(t, err, relock.ErrNotObtained, "holder's loss: %v", a.LostErr())
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NoError(t, a.Unlock(ctx))
				rm = f.collect(t)
				assert.Equal(t, int64(1), sum(t, rm, "relock.lock.acquisitions", lockAttrs(lt.kind, lt.mode, failed)...))
				failWait := hist(t, rm, "relock.lock.wait.duration", lockAttrs(lt.kind, lt.mode, failed)...)
				assert.Equal(t, uint64(1), failWait.Count, "failed waits recorded")
				assert.GreaterOrEqual(t, failWait.Sum, atLeast, "failed wait (s)")

				// A hold lost behind the holder's back.
				lostHolds := hist(t, rm, "relock.lock.hold.duration", kind).Count
				require.NoError(t, a.Lock(ctx))
				n, err := f.rdb.Del(ctx, "relock:"+lt.kind+":{"+name+"}").Result()
				require.NoError(t, err)
				require.Equal(t, int64(1), n, "keys deleted")
				select {
				case <-a.Lost():
				case <-time.After(5 * time.Second):
					t.Fatal("the hold was not lost after its key was deleted")
				}
				require.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
				// Lost fires before the observers have seen the loss.
				gone := attribute.String("relock.lock.loss.reason", "gone")
				require.Eventually(t, func() bool {
					return sum(t, f.collect(t), "relock.lock.losses", kind, gone) == 1
				}, 5*time.Second, 5*time.Millisecond, "losses")
				rm = f.collect(t)
				assert.Equal(t, int64(0), held(rm), "held after the loss")
				// The lost hold's duration has no mode (a loss ends both).
				assert.Equal(t, lostHolds+1, hist(t, rm, "relock.lock.hold.duration", kind).Count, "holds ended")

				// A renewal round that fails; the next one succeeds.
				require.NoError(t, a.Lock(ctx))
				f.failing.Store(true)
				select {
				case <-f.renewalFailed:
				case <-time.After(5 * time.Second):
					f.failing.Store(false)
					t.Fatal("no renewal round failed")
				}
				f.failing.Store(false)
				if err := a.Unlock(ctx); err != nil {
					// Lost in the meantime: the round and its retries
					// failed until the hold's local deadline.
					require.ErrorIs(t, err, relock.ErrNotHeld)
				}
				rm = f.collect(t)
				assert.GreaterOrEqual(t, sum(t, rm, "relock.watchdog.renewal.failures"), int64(1), "renewal failures")
				assert.GreaterOrEqual(t, sum(t, rm, "relock.watchdog.renewal.failed_holds"), int64(1), "holds whose renewal failed")
				require.Eventually(t, func() bool { return held(f.collect(t)) == 0 }, 5*time.Second, 5*time.Millisecond,
					"held after the renewal failure")

				// Close loses what is still held, for its own reason.
				closed := attribute.String("relock.lock.loss.reason", "closed")
				require.NoError(t, a.Lock(ctx))
				require.NoError(t, f.client.Close())
				<-a.Lost()
				rm = f.collect(t)
				assert.Equal(t, int64(1), sum(t, rm, "relock.lock.losses", kind, closed), "losses after Close")
				assert.Equal(t, int64(0), held(rm), "held after Close")

				checkAttributes(t, rm, lt.kind, name)
			})
		})
	}
}

// checkAttributes checks every data point of rm: lock instruments say the
// lock type, acquisitions their outcome, and nothing carries the lock's
// name or an attribute this package does not define.
func checkAttributes(t *testing.T, rm metricdata.ResourceMetrics, kind, name string) {
	t.Helper()
	allowed := map[string]map[attribute.Key]bool{
		"relock.lock.acquisitions":             {"relock.lock.type": true, "relock.lock.mode": true, "relock.lock.outcome": true},
		"relock.lock.wait.duration":            {"relock.lock.type": true, "relock.lock.mode": true, "relock.lock.outcome": true},
		"relock.lock.hold.duration":            {"relock.lock.type": true, "relock.lock.mode": true},
		"relock.lock.held":                     {"relock.lock.type": true},
		"relock.lock.losses":                   {"relock.lock.type": true, "relock.lock.loss.reason": true},
		"relock.watchdog.renewal.failures":     {},
		"relock.watchdog.renewal.failed_holds": {},
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, relockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			keys, ok := allowed[m.Name]
			if !assert.Truef(t, ok, "unexpected instrument %q", m.Name) {
				continue
			}
			assert.NotEmptyf(t, m.Description, "%s: description", m.Name)
			assert.NotEmptyf(t, m.Unit, "%s: unit", m.Name)
			for _, set := range attributeSets(t, m) {
				for _, kv := range set.ToSlice() {
					assert.Truef(t, keys[kv.Key], "%s: unexpected attribute %s", m.Name, kv.Key)
					assert.NotContainsf(t, kv.Value.String(), name, "%s: attribute %s carries the lock name", m.Name, kv.Key)
				}
				if strings.HasPrefix(m.Name, "relock.lock.") {
					v, _ := set.Value("relock.lock.type")
					assert.Equalf(t, kind, v.AsString(), "%s: relock.lock.type", m.Name)
				}
				if keys["relock.lock.outcome"] {
					v, _ := set.Value("relock.lock.outcome")
					assert.Containsf(t, []string{"acquired", "failed"}, v.AsString(), "%s: relock.lock.outcome", m.Name)
				}
			}
		}
	}
	for m := range allowed {
		assert.Truef(t, seen[m], "instrument %s recorded nothing", m)
	}
}

// An rwlock's read and write sides are counted apart, but a hold that
// begins with a write and ends with a read unlock (a downgrade) is one
// hold: held returns to 0.
func TestRWLockModes(t *testing.T) {
	onServers(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		f := newFixture(t, addr)
		l := rwlock.New(f.client, uniqueName(t))

		require.NoError(t, l.RLock(ctx))
		require.NoError(t, l.RUnlock(ctx))
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.RLock(ctx))
		require.NoError(t, l.Unlock(ctx))
		assert.Equal(t, int64(1), sum(t, f.collect(t), "relock.lock.held", typeAttr("rwlock")), "held after the write unlock")
		require.NoError(t, l.RUnlock(ctx))

		rm := f.collect(t)
		assert.Equal(t, int64(1), sum(t, rm, "relock.lock.acquisitions", lockAttrs("rwlock", "read", acquired)...), "read acquisitions")
		assert.Equal(t, int64(1), sum(t, rm, "relock.lock.acquisitions", lockAttrs("rwlock", "write", acquired)...), "write acquisitions")
		assert.Equal(t, uint64(2), hist(t, rm, "relock.lock.hold.duration", lockAttrs("rwlock", "read")...).Count,
			"holds ended by a read unlock")
		assert.Equal(t, int64(0), sum(t, rm, "relock.lock.held", typeAttr("rwlock")), "held")
	})
}

// With a nil MeterProvider, WithMetrics records with the global one.
func TestGlobalMeterProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})

	srv := miniredis.RunT(t)
	var failing atomic.Bool
	c := relock.New(newRedisClient(t, srv.Addr(), &failing), relockotel.WithMetrics(nil))
	t.Cleanup(func() { _ = c.Close() })
	m := mutex.New(c, uniqueName(t))
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, m.Unlock(context.Background()))

	assert.Equal(t, int64(1), sum(t, collect(t, reader), "relock.lock.acquisitions", typeAttr("mutex"), acquired))
}

// refuseCounters is a MeterProvider whose meters cannot make Int64Counters.
type refuseCounters struct{ metric.MeterProvider }

func (p refuseCounters) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return counterlessMeter{p.MeterProvider.Meter(name, opts...)}
}

type counterlessMeter struct{ metric.Meter }

func (counterlessMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, fmt.Errorf("%s: counters refused", name)
}

// Instruments that cannot be created are reported to otel.Handle; the
// others record.
func TestInstrumentErrors(t *testing.T) {
	var handled []error
	var mu sync.Mutex
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, err)
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	srv := miniredis.RunT(t)
	var failing atomic.Bool
	c := relock.New(newRedisClient(t, srv.Addr(), &failing), relockotel.WithMetrics(refuseCounters{mp}))
	t.Cleanup(func() { _ = c.Close() })

	mu.Lock()
	require.Len(t, handled, 1, "errors handled")
	for _, name := range []string{"relock.lock.acquisitions", "relock.lock.losses", "relock.watchdog.renewal.failures", "relock.watchdog.renewal.failed_holds"} {
		assert.ErrorContains(t, handled[0], name)
	}
	mu.Unlock()

	m := mutex.New(c, uniqueName(t))
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, m.Unlock(context.Background()))
	rm := collect(t, reader)
	assert.Equal(t, metricdata.Metrics{}, find(rm, "relock.lock.acquisitions"))
	assert.Equal(t, uint64(1), hist(t, rm, "relock.lock.hold.duration", typeAttr("mutex")).Count, "holds")
	assert.Equal(t, int64(0), sum(t, rm, "relock.lock.held", typeAttr("mutex")), "held")
}

// An election's leaderships are holds of the lock type "election".
func TestElectionMetrics(t *testing.T) {
	onServers(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		f := newFixture(t, addr)
		e := election.New(f.client, uniqueName(t))
		kind := typeAttr("election")

		require.NoError(t, e.Campaign(ctx, "host-a"))
		assert.Equal(t, int64(1), sum(t, f.collect(t), "relock.lock.held", kind), "held while leading")
		require.NoError(t, e.Resign(ctx))
		rm := f.collect(t)
		assert.Equal(t, int64(1), sum(t, rm, "relock.lock.acquisitions", kind, acquired))
		assert.Equal(t, uint64(1), hist(t, rm, "relock.lock.hold.duration", kind).Count)
		assert.Equal(t, int64(0), sum(t, rm, "relock.lock.held", kind), "held after the resignation")
	})
}

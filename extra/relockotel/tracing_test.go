package relockotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/mutex"
)

// newTracer returns a TracerProvider that exports every span, as it ends,
// to the returned in-memory exporter.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// spansNamed returns the exported spans called name.
func spansNamed(exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// noTokens checks that no attribute, status or event of the spans carries
// one of the owner tokens.
func noTokens(t *testing.T, spans tracetest.SpanStubs, tokens ...string) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Status.Description}
		for _, kv := range s.Attributes {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, text := range texts {
			for _, tok := range tokens {
				assert.NotContainsf(t, text, tok, "span %s carries an owner token", s.Name)
			}
		}
	}
}

// exception returns the message of a span's exception event, if it has
// one.
func exception(s tracetest.SpanStub) (string, bool) {
	for _, ev := range s.Events {
		if ev.Name == "exception" {
			for _, kv := range ev.Attributes {
				if kv.Key == "exception.message" {
					return kv.Value.AsString(), true
				}
			}
		}
	}
	return "", false
}

// The spans a user sees, for each lock type: none for an acquire that did
// not wait, one for an acquire that waited and got the lock, one for an
// acquire that timed out, one for a lost hold, and none for unlocks.
func TestTracing(t *testing.T) {
	type traced interface {
		locker
		Fingerprint() string
		Token() string
	}
	for _, lt := range lockTypes {
		t.Run("kind="+lt.kind, func(t *testing.T) {
			t.Parallel()
			onServers(t, func(t *testing.T, addr string) {
				ctx := context.Background()
				tp, exp := newTracer(t)
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				t.Cleanup(func() { _ = rdb.Close() })
				// Acquires shorter than minWait have no span: far longer than an
				// uncontended acquire takes, even on a loaded machine.
				const minWait = 100 * time.Millisecond
				c := relock.New(rdb, relockotel.WithTracing(tp, relockotel.WithMinWait(minWait)),
					relock.WithWatchdogTimeout(1500*time.Millisecond))
				t.Cleanup(func() { _ = c.Close() })
				name := uniqueName(t)
				a, b := lt.make(c, name).(traced), lt.make(c, name).(traced)
				mode := func(s tracetest.SpanStub) {
					t.Helper()
					v, ok := attrs(s)["relock.lock.mode"]
					if lt.mode == "" {
						assert.False(t, ok, "relock.lock.mode")
					} else {
						assert.Equal(t, lt.mode, v.AsString(), "relock.lock.mode")
					}
				}
				// lockA takes the lock with a, which does not wait: a span of
				// it is one that took minWait (a machine so loaded that an
				// uncontended acquire took that long), and none if the call
				// took less.
				var slowA int
				lockA := func() {
					t.Helper()
					start := time.Now()
					require.NoError(t, a.Lock(ctx))
					if took := time.Since(start); took >= minWait {
						slowA++
						t.Logf("an uncontended acquire took %v: it may have a span", took)
					}
				}
				// spansOf returns the spans of owner o; the others must be
				// acquires of a that took minWait.
				spansOf := func(o traced) tracetest.SpanStubs {
					t.Helper()
					var mine tracetest.SpanStubs
					others := 0
					for _, s := range exp.GetSpans() {
						if s.InstrumentationScope.Name != relockotel.ScopeName {
							continue // the test's own spans
						}
						at := attrs(s)
						if at["relock.lock.owner"].AsString() == o.Fingerprint() {
							mine = append(mine, s)
							continue
						}
						others++
						assert.Equal(t, a.Fingerprint(), at["relock.lock.owner"].AsString(), "span %s of another owner", s.Name)
						assert.Equal(t, relockotel.SpanAcquire, s.Name)
						assert.Equal(t, "acquired", at["relock.lock.outcome"].AsString())
						assert.GreaterOrEqual(t, s.EndTime.Sub(s.StartTime), minWait, "a's span")
					}
					assert.LessOrEqual(t, others, slowA, "spans of acquires that did not take %v", minWait)
					return mine
				}

				// An acquire that did not wait: no span (spansOf checks that
				// any span of a's is of an acquire that took minWait).
				lockA()
				require.NoError(t, a.Unlock(ctx))
				assert.Empty(t, spansOf(b), "spans of b")
				exp.Reset()
				slowA = 0

				// An acquire that waited for the holder's unlock, made 300ms
				// after b was seen waiting.
				// The caller's span is the parent of the acquire's.
				lockA()
				unlocked := unlockAfterWaiter(t, rdb, name, 300*time.Millisecond, func() error { return a.Unlock(ctx) })
				reqCtx, req := tp.Tracer("test").Start(ctx, "request")
				began := time.Now()
				require.NoError(t, b.Lock(reqCtx))
				got := time.Now()
				req.End()
				require.NoError(t, <-unlocked)
				require.NoError(t, b.Unlock(ctx))
				spans := spansOf(b)
				require.Len(t, spans, 1, "spans of the waited acquire")
				s := spans[0]
				assert.Equal(t, relockotel.SpanAcquire, s.Name)
				assert.Equal(t, relockotel.ScopeName, s.InstrumentationScope.Name)
				assert.Equal(t, req.SpanContext().SpanID(), s.Parent.SpanID(), "parent: the caller's span")
				assert.Equal(t, req.SpanContext().TraceID(), s.SpanContext.TraceID(), "trace: the caller's")
				at := attrs(s)
				attempts, granted := at["relock.lock.attempts"].AsInt64(), at["relock.lock.granted"].AsBool()
				assert.True(t, attempts > 1 || granted, "a wait shows as attempts (%d) or a grant (%v)", attempts, granted)
				assert.Positive(t, attempts, "attempts")
				assert.Equal(t, lt.kind, at["relock.lock.type"].AsString())
				assert.Equal(t, name, at["relock.lock.name"].AsString())
				assert.Equal(t, "acquired", at["relock.lock.outcome"].AsString())
				mode(s)
				_, hasErr := at["error.type"]
				assert.False(t, hasErr, "error.type of an acquire that succeeded")
				wait := at["relock.lock.wait.duration"].AsFloat64()
				assert.GreaterOrEqual(t, wait, 0.25, "wait (s)")
				assert.InDelta(t, wait, s.EndTime.Sub(s.StartTime).Seconds(), 1e-6, "the span lasts the wait")
				// The span lies within the call: it began when the call did
				// (give or take the gap between the hold's start and its
				// event) and ended before the call returned.
				const clocks = time.Millisecond // the span's times are wall-clock readings
				assert.False(t, s.StartTime.Before(began.Add(-clocks)), "start %v before the call %v", s.StartTime, began)
				assert.False(t, s.EndTime.After(got.Add(clocks)), "end %v after the call returned %v", s.EndTime, got)
				assert.Equal(t, codes.Unset, s.Status.Code)
				exp.Reset()
				slowA = 0

				// An acquire whose ctx ends while the lock is held elsewhere.
				lockA()
				noWaiter(t, rdb, name)
				tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				deadline, _ := tctx.Deadline()
				stop := watchWaiter(rdb, name)
				beganTimeout := time.Now()
				err := b.Lock(tctx)
				cancel()
				// b's call began before it was seen waiting, and failed at its
				// deadline or later: it waited at least that long.
				atLeast := waitedAtLeast(t, deadline, stop)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NoError(t, a.Unlock(ctx))
				spans = spansOf(b)
				require.Len(t, spans, 1, "spans of the acquire that timed out")
				s = spans[0]
				assert.Equal(t, relockotel.SpanAcquire, s.Name)
				at = attrs(s)
				assert.Equal(t, "failed", at["relock.lock.outcome"].AsString())
				assert.Equal(t, "timeout", at["error.type"].AsString())
				mode(s)
				assert.GreaterOrEqual(t, s.EndTime.Sub(s.StartTime), atLeast, "span length")
				assert.False(t, s.StartTime.Before(beganTimeout.Add(-clocks)), "start %v before the call %v", s.StartTime, beganTimeout)
				assert.False(t, s.EndTime.Before(deadline.Add(-clocks)), "end %v before the deadline %v", s.EndTime, deadline)
				assert.Equal(t, codes.Error, s.Status.Code)
				assert.Equal(t, err.Error(), s.Status.Description)
				msg, ok := exception(s)
				assert.True(t, ok, "exception event")
				assert.Equal(t, err.Error(), msg)
				exp.Reset()
				slowA = 0

				// A hold lost behind the holder's back: its key is deleted, the
				// watchdog's next renewal finds out.
				lockBegan := time.Now()
				lockA()
				n, err := rdb.Del(ctx, "relock:"+lt.kind+":{"+name+"}").Result()
				require.NoError(t, err)
				require.Equal(t, int64(1), n, "keys deleted")
				select {
				case <-a.Lost():
				case <-time.After(5 * time.Second):
					t.Fatal("the hold was not lost after its key was deleted")
				}
				lost := time.Now()
				require.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)
				// Lost fires before the observers have seen the loss.
				lostSpans := func() tracetest.SpanStubs { return spansNamed(exp, relockotel.SpanLost) }
				require.Eventually(t, func() bool { return len(lostSpans()) > 0 }, 5*time.Second, 5*time.Millisecond,
					"no span for the lost hold")
				spans = spansOf(a)
				require.Len(t, lostSpans(), 1, "spans of the lost hold")
				for _, sp := range spans {
					if sp.Name == relockotel.SpanLost {
						s = sp
					}
				}
				assert.Equal(t, relockotel.SpanLost, s.Name)
				at = attrs(s)
				assert.Equal(t, lt.kind, at["relock.lock.type"].AsString())
				assert.Equal(t, name, at["relock.lock.name"].AsString())
				assert.Equal(t, "gone", at["relock.lock.loss.reason"].AsString())
				assert.InDelta(t, at["relock.lock.hold.duration"].AsFloat64(), s.EndTime.Sub(s.StartTime).Seconds(), 1e-6,
					"the span lasts the hold")
				// It began with the hold, before the loss.
				assert.False(t, s.StartTime.Before(lockBegan.Add(-clocks)), "start %v before the Lock call %v", s.StartTime, lockBegan)
				assert.True(t, s.StartTime.Before(lost), "start %v after the loss %v", s.StartTime, lost)
				assert.Equal(t, codes.Error, s.Status.Code)
				require.ErrorIs(t, a.LostErr(), relock.ErrLockGone)
				assert.Equal(t, a.LostErr().Error(), s.Status.Description)
				_, ok = exception(s)
				assert.True(t, ok, "exception event")

				noTokens(t, exp.GetSpans(), a.Token(), b.Token())
			})
		})
	}
}

// An election is traced as the locks are: a Campaign that waited for the
// leader to resign.
func TestTracingElection(t *testing.T) {
	onServers(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		tp, exp := newTracer(t)
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		c := relock.New(rdb, relockotel.WithTracing(tp, relockotel.WithMinWait(100*time.Millisecond)))
		t.Cleanup(func() { _ = c.Close() })
		name := uniqueName(t)
		a, b := election.New(c, name), election.New(c, name)

		require.NoError(t, a.Campaign(ctx, "a"))
		resigned := unlockAfterWaiter(t, rdb, name, 300*time.Millisecond, func() error { return a.Resign(ctx) })
		require.NoError(t, b.Campaign(ctx, "b"))
		require.NoError(t, <-resigned)
		require.NoError(t, b.Resign(ctx))

		// a's Campaign did not wait: it has a span only if it took 100ms.
		var spans tracetest.SpanStubs
		for _, s := range exp.GetSpans() {
			if attrs(s)["relock.lock.owner"].AsString() == b.Fingerprint() {
				spans = append(spans, s)
			} else {
				assert.GreaterOrEqual(t, s.EndTime.Sub(s.StartTime), 100*time.Millisecond, "span %s of a", s.Name)
			}
		}
		require.Len(t, spans, 1, "spans of the Campaign that waited")
		assert.Equal(t, relockotel.SpanAcquire, spans[0].Name)
		at := attrs(spans[0])
		assert.Equal(t, "election", at["relock.lock.type"].AsString())
		assert.Equal(t, name, at["relock.lock.name"].AsString())
		assert.Equal(t, "acquired", at["relock.lock.outcome"].AsString())
		assert.GreaterOrEqual(t, at["relock.lock.wait.duration"].AsFloat64(), 0.25)
		noTokens(t, exp.GetSpans(), a.Token(), b.Token())
	})
}

// Tracing is off unless asked for: WithMetrics records no span, even with
// a global TracerProvider that records; WithTracing(nil) uses that one.
func TestTracingOptIn(t *testing.T) {
	tp, exp := newTracer(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	srv := miniredis.RunT(t)
	ctx := context.Background()

	// A TryLock that fails is a span when traced (an acquire that failed,
	// whatever its length): ErrAlreadyHeld on a mutex held by the handle.
	refused := func(c *relock.Client) {
		t.Helper()
		m := mutex.New(c, uniqueName(t))
		require.NoError(t, m.Lock(ctx))
		_, err := m.TryLock(ctx)
		require.ErrorIs(t, err, relock.ErrAlreadyHeld)
		require.NoError(t, m.Unlock(ctx))
	}

	metricsOnly := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}), relockotel.WithMetrics(mp))
	t.Cleanup(func() { _ = metricsOnly.Close() })
	refused(metricsOnly)
	assert.Empty(t, exp.GetSpans(), "spans without WithTracing")

	global := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}), relockotel.WithTracing(nil))
	t.Cleanup(func() { _ = global.Close() })
	refused(global)
	// The Lock did not wait: it has a span only if it took 10ms (a loaded
	// machine).
	var spans tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if attrs(s)["relock.lock.outcome"].AsString() == "failed" {
			spans = append(spans, s)
		} else {
			assert.GreaterOrEqual(t, s.EndTime.Sub(s.StartTime), relockotel.DefaultMinWait, "span of the Lock")
		}
	}
	require.Len(t, spans, 1, "spans of failures with WithTracing(nil)")
	at := attrs(spans[0])
	assert.Equal(t, "refused", at["error.type"].AsString())
	assert.True(t, strings.HasPrefix(spans[0].Status.Description, "mutex: "), "status %q", spans[0].Status.Description)
}

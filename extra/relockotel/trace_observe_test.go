package relockotel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock"
)

func newTestTracer(t *testing.T, opts ...TracingOption) (*tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := tracingConfig{minWait: DefaultMinWait}
	for _, o := range opts {
		o(&cfg)
	}
	return &tracer{t: tp.Tracer(ScopeName), minWait: cfg.minWait}, exp
}

// Which events make a span, with the default threshold: acquires that
// took at least DefaultMinWait, every failure and every loss; nothing
// else.
func TestSpansOfEvents(t *testing.T) {
	gone := fmt.Errorf("%w: %w", relock.ErrNotHeld, relock.ErrLockGone)
	cases := []struct {
		ev   relock.Event
		span string // "" for none
	}{
		{relock.Event{Type: relock.EventAcquired, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: time.Millisecond}, ""},
		{relock.Event{Type: relock.EventAcquired, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: DefaultMinWait - 1}, ""},
		{relock.Event{Type: relock.EventAcquired, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: DefaultMinWait}, SpanAcquire},
		{relock.Event{Type: relock.EventAcquired, Kind: "rwlock", Name: "n", Mode: "read", Owner: "0123abcd", Wait: time.Second}, SpanAcquire},
		{relock.Event{Type: relock.EventFailed, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: time.Microsecond, Err: relock.ErrAlreadyHeld}, SpanAcquire},
		{relock.Event{Type: relock.EventReleased, Kind: "mutex", Name: "n", Owner: "0123abcd", Held: time.Hour}, ""},
		{relock.Event{Type: relock.EventLost, Kind: "fair", Name: "n", Owner: "0123abcd", Held: time.Minute, Err: gone}, SpanLost},
		{relock.Event{Type: relock.EventRenewalFailed, Holds: 3, Err: errors.New("timeout")}, ""},
		{relock.Event{Type: relock.EventPushUnavailable, Err: errors.New("NOPERM")}, ""},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/%v", tc.ev.Type, tc.ev.Wait), func(t *testing.T) {
			tr, exp := newTestTracer(t)
			before := time.Now()
			tr.observe(tc.ev)
			after := time.Now()
			spans := exp.GetSpans()
			if tc.span == "" {
				assert.Empty(t, spans)
				return
			}
			require.Len(t, spans, 1)
			s := spans[0]
			assert.Equal(t, tc.span, s.Name)
			// The span ends as the event is seen, and began as long before
			// as the event says.
			assert.False(t, s.EndTime.Before(before) || s.EndTime.After(after), "end %v not in [%v, %v]", s.EndTime, before, after)
			length := tc.ev.Wait
			if tc.ev.Type == relock.EventLost {
				length = tc.ev.Held
			}
			assert.Equal(t, length, s.EndTime.Sub(s.StartTime))
		})
	}
}

func TestWithMinWait(t *testing.T) {
	ev := relock.Event{Type: relock.EventAcquired, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: time.Microsecond}
	for _, d := range []time.Duration{0, -time.Second} {
		tr, exp := newTestTracer(t, WithMinWait(d))
		tr.observe(ev)
		assert.Len(t, exp.GetSpans(), 1, "WithMinWait(%v): every acquire", d)
	}
	tr, exp := newTestTracer(t, WithMinWait(time.Minute))
	tr.observe(relock.Event{Type: relock.EventAcquired, Kind: "mutex", Name: "n", Wait: time.Second})
	tr.observe(relock.Event{Type: relock.EventFailed, Kind: "mutex", Name: "n", Wait: time.Second, Err: context.Canceled})
	spans := exp.GetSpans()
	require.Len(t, spans, 1, "WithMinWait(1m): the failure only")
	assert.Equal(t, "failed", attrs(spans[0])["relock.lock.outcome"])
}

func TestErrorType(t *testing.T) {
	gaveUp := func(err error) error { return fmt.Errorf("mutex: lock %q: %w: %w", "n", relock.ErrNotObtained, err) }
	for want, err := range map[string]error{
		"timeout":        gaveUp(context.DeadlineExceeded),
		"canceled":       gaveUp(context.Canceled),
		"closed":         gaveUp(relock.ErrClosed),
		"refused":        fmt.Errorf("x: %w", relock.ErrAlreadyHeld),
		"not_replicated": fmt.Errorf("x: %w", relock.ErrNotReplicated),
		"_OTHER":         errors.New("dial tcp: connection refused"),
	} {
		assert.Equal(t, want, errorType(err), "%v", err)
	}
	for _, err := range []error{relock.ErrUpgrade, relock.ErrNotHeld, relock.ErrCapacityMismatch} {
		assert.Equal(t, "refused", errorType(err), "%v", err)
	}
}

func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

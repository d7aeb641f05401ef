package relockotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/relock-go/relock"
)

// Span names.
const (
	SpanAcquire = "relock.lock.acquire" // an acquire that waited, or failed
	SpanLost    = "relock.lock.lost"    // a hold that was lost, from its start to its loss
)

// DefaultMinWait is the shortest acquire that WithTracing traces by
// default (see WithMinWait).
const DefaultMinWait = 10 * time.Millisecond

// Span attribute keys, besides relock.lock.type, relock.lock.mode,
// relock.lock.outcome and relock.lock.loss.reason, which the metrics have
// too.
const (
	keyName     = attribute.Key("relock.lock.name")
	keyOwner    = attribute.Key("relock.lock.owner")
	keyWaitSecs = attribute.Key("relock.lock.wait.duration")
	keyAttempts = attribute.Key("relock.lock.attempts")
	keyGranted  = attribute.Key("relock.lock.granted")
	keyHoldSecs = attribute.Key("relock.lock.hold.duration")
	keyError    = attribute.Key("error.type")
)

// A TracingOption changes what WithTracing records.
type TracingOption func(*tracingConfig)

type tracingConfig struct{ minWait time.Duration }

// WithMinWait makes WithTracing trace the acquires that took at least d
// (DefaultMinWait by default), besides those that waited; d <= 0 traces
// every acquire. Failed acquires and lost holds are traced whatever d.
func WithMinWait(d time.Duration) TracingOption {
	return func(c *tracingConfig) { c.minWait = max(d, 0) }
}

// WithTracing makes a Client record OpenTelemetry spans of its locks'
// waits and losses with tp's tracer named ScopeName. With a nil tp it
// uses the global TracerProvider, otel.GetTracerProvider(). It records no
// metrics (WithMetrics does), and WithMetrics no spans: give both for
// both. Without it nothing is traced. Give it once per Client: each
// WithTracing is one more observer.
//
// It records, from the Client's events (relock.WithObserver):
//
//   - SpanAcquire ("relock.lock.acquire") for each acquire call that
//     waited (it made more than one attempt, or a release handed the
//     lock over to it), that took at least WithMinWait's duration
//     (DefaultMinWait, 10ms: a slow Redis), or that failed, whatever its
//     duration: a Lock whose ctx ended, a Redis error, a refusal such as
//     relock.ErrAlreadyHeld. The span is a child of the span in the ctx
//     the caller gave the acquire (Event.Ctx), begins when the call began
//     and ends at its outcome; attributes relock.lock.type,
//     relock.lock.name, relock.lock.mode (an rwlock's read or write),
//     relock.lock.owner (the owner's fingerprint, never its token),
//     relock.lock.wait.duration (seconds, as the span's length),
//     relock.lock.attempts (attempts sent to Redis), relock.lock.granted
//     (handed over by a release rather than taken by an attempt),
//     relock.lock.outcome (acquired or failed) and, for a failure,
//     error.type (timeout: the ctx's deadline passed; canceled; closed:
//     the Client was closed; refused: relock.ErrAlreadyHeld, ErrUpgrade,
//     ErrNotHeld or ErrCapacityMismatch; not_replicated; else _OTHER),
//     status Error and the error as an exception event. A first attempt
//     that got the lock at once has no span, nor has a re-entry of a
//     hold. A TryLock that finds the lock held is not a failure, and is
//     traced only if it took that long.
//   - SpanLost ("relock.lock.lost") for each hold that was lost: the span
//     runs from the hold's start to the moment relock noticed the loss,
//     with relock.lock.type, relock.lock.name, relock.lock.owner,
//     relock.lock.hold.duration (seconds), relock.lock.loss.reason
//     (expired, gone or closed, as in the metrics), status Error with
//     the cause, and the cause as an exception event. Holds that end by
//     an unlock have no span.
//
// A lost hold is found by the watchdog (or by the next call of its
// handle), which belongs to no caller's trace: its span has no parent,
// and begins a trace of its own.
//
// Lock names are attributes of spans (each span is one event, not a time
// series), but never of metrics. Owner tokens never appear: owners are
// named by their fingerprint, as in relock's logs.
func WithTracing(tp trace.TracerProvider, opts ...TracingOption) relock.Option {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	cfg := tracingConfig{minWait: DefaultMinWait}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	t := &tracer{t: tp.Tracer(ScopeName), minWait: cfg.minWait}
	return relock.WithObserver(t.observe)
}

// tracer turns events into spans.
type tracer struct {
	t       trace.Tracer
	minWait time.Duration
}

// observe records e's span, if it has one. It runs on the goroutine of
// the lock call (or the watchdog): it starts and ends a span, which the
// SDK hands to its span processors (a batch processor exports later).
func (t *tracer) observe(e relock.Event) {
	switch e.Type {
	case relock.EventAcquired:
		if e.Attempts > 1 || e.Granted || e.Wait >= t.minWait {
			t.acquire(e)
		}
	case relock.EventFailed:
		t.acquire(e)
	case relock.EventLost:
		t.lost(e)
	}
}

func (t *tracer) acquire(e relock.Event) {
	end := time.Now()
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, keyType.String(e.Kind), keyName.String(e.Name))
	if e.Mode != "" {
		attrs = append(attrs, keyMode.String(e.Mode))
	}
	attrs = append(attrs, keyOwner.String(e.Owner), keyWaitSecs.Float64(e.Wait.Seconds()),
		keyAttempts.Int(e.Attempts), keyGranted.Bool(e.Granted))
	if e.Type == relock.EventAcquired {
		attrs = append(attrs, keyOutcome.String(outcomeAcquired))
	} else {
		attrs = append(attrs, keyOutcome.String(outcomeFailed), keyError.String(errorType(e.Err)))
	}
	// The caller's span, if its ctx has one, is the parent (only its span
	// context is kept: the ctx may have ended).
	parent := context.Background()
	if e.Ctx != nil {
		parent = trace.ContextWithSpanContext(parent, trace.SpanContextFromContext(e.Ctx))
	}
	_, span := t.t.Start(parent, SpanAcquire,
		trace.WithTimestamp(end.Add(-e.Wait)), trace.WithAttributes(attrs...))
	if e.Type == relock.EventFailed && e.Err != nil {
		span.RecordError(e.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

func (t *tracer) lost(e relock.Event) {
	end := time.Now()
	_, span := t.t.Start(context.Background(), SpanLost,
		trace.WithTimestamp(end.Add(-e.Held)),
		trace.WithAttributes(keyType.String(e.Kind), keyName.String(e.Name), keyOwner.String(e.Owner),
			keyHoldSecs.Float64(e.Held.Seconds()), keyReason.String(reasonOf(e.Err))))
	if e.Err != nil {
		span.RecordError(e.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, e.Err.Error())
	} else {
		span.SetStatus(codes.Error, "hold lost")
	}
	span.End(trace.WithTimestamp(end))
}

// errorType names why an acquire failed, for error.type: a few values,
// as that attribute wants.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, relock.ErrClosed):
		return "closed"
	case errors.Is(err, relock.ErrAlreadyHeld), errors.Is(err, relock.ErrUpgrade),
		errors.Is(err, relock.ErrNotHeld), errors.Is(err, relock.ErrCapacityMismatch):
		return "refused"
	case errors.Is(err, relock.ErrNotReplicated):
		return "not_replicated"
	}
	return "_OTHER"
}

package relockotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/relock-go/relock"
)

// ScopeName is the instrumentation scope of the instruments WithMetrics
// creates (the name given to MeterProvider.Meter), for views that select
// them.
const ScopeName = "github.com/relock-go/relock/extra/relockotel"

// Instrument names. Dashboards and alerts.yaml depend on them (and on the
// attribute keys below): never rename them.
const (
	nameAcquisitions = "relock.lock.acquisitions"
	nameWait         = "relock.lock.wait.duration"
	nameHold         = "relock.lock.hold.duration"
	nameHeld         = "relock.lock.held"
	nameLosses       = "relock.lock.losses"
	nameRenewalFails = "relock.watchdog.renewal.failures"
	nameFailedHolds  = "relock.watchdog.renewal.failed_holds"
)

// Attribute keys and the values of relock.lock.outcome.
const (
	keyType    = attribute.Key("relock.lock.type")
	keyMode    = attribute.Key("relock.lock.mode")
	keyOutcome = attribute.Key("relock.lock.outcome")
	keyReason  = attribute.Key("relock.lock.loss.reason")

	outcomeAcquired = "acquired"
	outcomeFailed   = "failed"
)

// Bucket boundaries, in seconds. Waits: from an uncontended acquire's round
// trip (100µs) to a minute. Holds: from a millisecond to an hour.
var (
	waitBounds = []float64{
		0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
	}
	holdBounds = []float64{
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
		1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600,
	}
)

// Lock types and rwlock modes that this version knows: their attribute
// sets are built once, in WithMetrics. These are the types that emit
// events (a latch emits none).
var (
	knownKinds = []string{"mutex", "reentrant", "fair", "rwlock", "semaphore", "redlock", "election"}
	knownModes = []string{"", "read", "write"}
)

// WithMetrics makes a Client record OpenTelemetry metrics of its locks with
// mp's meter named ScopeName. With a nil mp it uses the global
// MeterProvider, otel.GetMeterProvider() (which forwards to a provider set
// later with otel.SetMeterProvider). The instruments are created once,
// here; an instrument that cannot be created is reported to otel.Handle
// and left out.
//
// Several Clients may share a MeterProvider: their measurements add up.
// Give it once per Client: each WithMetrics is one more observer, and two
// on one Client count every event twice.
//
// See the package documentation for the instruments and their attributes.
func WithMetrics(mp metric.MeterProvider) relock.Option {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return relock.WithObserver(newRecorder(mp.Meter(ScopeName)).observe)
}

// recorder turns events into measurements.
type recorder struct {
	acquisitions metric.Int64Counter
	wait         metric.Float64Histogram
	hold         metric.Float64Histogram
	held         metric.Int64UpDownCounter
	losses       metric.Int64Counter
	renewalFails metric.Int64Counter
	failedHolds  metric.Int64Counter

	sets map[setKey]*attrSets // read-only after newRecorder
}

type setKey struct{ kind, mode string }

// attrSets are the measurement options of one lock type and mode, built
// once so that recording an event allocates nothing.
type attrSets struct {
	acquired, failed       []metric.AddOption            // type, mode, outcome
	acquiredWait, failWait []metric.RecordOption         // type, mode, outcome
	lock                   []metric.RecordOption         // type, mode
	kind                   []metric.AddOption            // type only
	loss                   map[string][]metric.AddOption // type, loss reason
}

// Values of relock.lock.loss.reason, one per sentinel a loss matches.
const (
	reasonExpired = "expired" // relock.ErrLeaseExpired
	reasonGone    = "gone"    // relock.ErrLockGone
	reasonClosed  = "closed"  // relock.ErrClosed
)

var reasons = []string{reasonExpired, reasonGone, reasonClosed}

// reasonOf names why a hold was lost.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, relock.ErrClosed):
		return reasonClosed
	case errors.Is(err, relock.ErrLockGone):
		return reasonGone
	}
	return reasonExpired
}

func newAttrSets(kind, mode string) *attrSets {
	lock := []attribute.KeyValue{keyType.String(kind)}
	if mode != "" {
		lock = append(lock, keyMode.String(mode))
	}
	with := func(outcome string) metric.MeasurementOption {
		kv := append(lock[:len(lock):len(lock)], keyOutcome.String(outcome))
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	acquired, failed := with(outcomeAcquired), with(outcomeFailed)
	kindOnly := metric.WithAttributeSet(attribute.NewSet(keyType.String(kind)))
	loss := make(map[string][]metric.AddOption, len(reasons))
	for _, r := range reasons {
		loss[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyType.String(kind), keyReason.String(r)))}
	}
	return &attrSets{
		loss:         loss,
		acquired:     []metric.AddOption{acquired},
		failed:       []metric.AddOption{failed},
		acquiredWait: []metric.RecordOption{acquired},
		failWait:     []metric.RecordOption{failed},
		lock:         []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(lock...))},
		kind:         []metric.AddOption{kindOnly},
	}
}

func newRecorder(m metric.Meter) *recorder {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	r := &recorder{sets: make(map[setKey]*attrSets, len(knownKinds)*len(knownModes))}
	var err error

	r.acquisitions, err = m.Int64Counter(nameAcquisitions,
		metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquire calls that ended: outcome acquired (a new hold began; re-entries are not counted) or failed (the call returned an error)."))
	check(err)
	r.wait, err = m.Float64Histogram(nameWait,
		metric.WithUnit("s"),
		metric.WithDescription("How long acquire calls took, from the call to its outcome (acquired or failed), waiting included."),
		metric.WithExplicitBucketBoundaries(waitBounds...))
	check(err)
	r.hold, err = m.Float64Histogram(nameHold,
		metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted, from acquire to their final unlock or their loss."),
		metric.WithExplicitBucketBoundaries(holdBounds...))
	check(err)
	r.held, err = m.Int64UpDownCounter(nameHeld,
		metric.WithUnit("{hold}"),
		metric.WithDescription("Holds held now by this process (not yet unlocked or lost)."))
	check(err)
	r.losses, err = m.Int64Counter(nameLosses,
		metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost, by reason: expired (lease ran out, or no renewal confirmed in time), gone (key deleted or taken by another owner), closed (Client closed while holding)."))
	check(err)
	r.renewalFails, err = m.Int64Counter(nameRenewalFails,
		metric.WithUnit("{round}"),
		metric.WithDescription("Watchdog renewal rounds that could not confirm every renewal (retried soon)."))
	check(err)
	r.failedHolds, err = m.Int64Counter(nameFailedHolds,
		metric.WithUnit("{hold}"),
		metric.WithDescription("Holds whose renewal a failed watchdog round could not confirm, summed over failed rounds."))
	check(err)

	// Keep going with what was created: the others record nothing.
	if r.acquisitions == nil {
		r.acquisitions = noop.Int64Counter{}
	}
	if r.wait == nil {
		r.wait = noop.Float64Histogram{}
	}
	if r.hold == nil {
		r.hold = noop.Float64Histogram{}
	}
	if r.held == nil {
		r.held = noop.Int64UpDownCounter{}
	}
	if r.losses == nil {
		r.losses = noop.Int64Counter{}
	}
	if r.renewalFails == nil {
		r.renewalFails = noop.Int64Counter{}
	}
	if r.failedHolds == nil {
		r.failedHolds = noop.Int64Counter{}
	}
	if len(errs) > 0 {
		otel.Handle(errors.Join(errs...))
	}

	for _, k := range knownKinds {
		for _, md := range knownModes {
			r.sets[setKey{k, md}] = newAttrSets(k, md)
		}
	}
	return r
}

// attrs returns the attribute sets of kind and mode. A kind or mode this
// version does not know (a newer relock) is recorded too, at the cost of
// building its sets for the event.
func (r *recorder) attrs(kind, mode string) *attrSets {
	if s, ok := r.sets[setKey{kind, mode}]; ok {
		return s
	}
	return newAttrSets(kind, mode)
}

// observe records e. It runs on the lock call's goroutine (or the
// watchdog's): it only adds to instruments.
//
// relock.lock.held carries the lock type only: an rwlock hold may begin
// with a write and end with a read unlock (a downgrade), and a loss has no
// mode, so per-mode series would not return to 0.
func (r *recorder) observe(e relock.Event) {
	ctx := context.Background()
	switch e.Type {
	case relock.EventAcquired:
		s := r.attrs(e.Kind, e.Mode)
		r.acquisitions.Add(ctx, 1, s.acquired...)
		r.held.Add(ctx, 1, s.kind...)
		if e.Wait > 0 {
			r.wait.Record(ctx, e.Wait.Seconds(), s.acquiredWait...)
		}
	case relock.EventFailed:
		s := r.attrs(e.Kind, e.Mode)
		r.acquisitions.Add(ctx, 1, s.failed...)
		if e.Wait > 0 {
			r.wait.Record(ctx, e.Wait.Seconds(), s.failWait...)
		}
	case relock.EventReleased:
		s := r.attrs(e.Kind, e.Mode)
		r.hold.Record(ctx, e.Held.Seconds(), s.lock...)
		r.held.Add(ctx, -1, s.kind...)
	case relock.EventLost:
		s := r.attrs(e.Kind, e.Mode)
		r.hold.Record(ctx, e.Held.Seconds(), s.lock...)
		r.held.Add(ctx, -1, s.kind...)
		r.losses.Add(ctx, 1, s.loss[reasonOf(e.Err)]...)
	case relock.EventRenewalFailed:
		r.renewalFails.Add(ctx, 1)
		if e.Holds > 0 {
			r.failedHolds.Add(ctx, int64(e.Holds))
		}
	}
}

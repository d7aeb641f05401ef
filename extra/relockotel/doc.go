// Package relockotel records OpenTelemetry metrics of relock's locks: how
// many acquires succeed and fail, how long they wait, how long holds last,
// how many are held now, and how many are lost or fail to renew; and, if
// asked for, spans of the acquires that waited and of the holds that were
// lost.
//
// It is a nested module (github.com/relock-go/relock/extra/relockotel), so
// relock itself does not depend on OpenTelemetry. WithMetrics and
// WithTracing are relock.Options: each adds an observer
// (relock.WithObserver) that turns each relock.Event into measurements on
// instruments created once, or into spans. Give either or both:
//
//	client := relock.New(rdb, relockotel.WithMetrics(mp), relockotel.WithTracing(tp))
//
// # Instruments
//
// With the OpenTelemetry Prometheus exporter's default naming, they are
// exposed under the names in brackets.
//
//   - relock.lock.acquisitions (counter; relock_lock_acquisitions_total):
//     acquire calls that ended, by relock.lock.outcome: "acquired" (a new
//     hold began; re-entries of a hold are not counted) or "failed" (the
//     call returned an error: ctx ended, Client closed, Redis error, or a
//     refusal such as relock.ErrAlreadyHeld). A TryLock that finds the lock
//     held is neither.
//   - relock.lock.wait.duration (histogram, seconds;
//     relock_lock_wait_duration_seconds): how long each of those calls
//     took, waiting included, by relock.lock.outcome. Buckets from 100µs
//     to 60s.
//   - relock.lock.hold.duration (histogram, seconds;
//     relock_lock_hold_duration_seconds): how long holds lasted, recorded
//     when they end (final unlock or loss). Buckets from 1ms to 1h.
//   - relock.lock.held (up-down counter; relock_lock_held): holds held now
//     by the process, +1 when one begins, -1 when it is unlocked or lost.
//   - relock.lock.losses (counter; relock_lock_losses_total): holds lost
//     (lease ran out, key deleted or taken, no renewal confirmed before the
//     local deadline, Client closed).
//   - relock.watchdog.renewal.failures (counter;
//     relock_watchdog_renewal_failures_total): watchdog renewal rounds that
//     could not confirm every renewal. The watchdog retries soon; a hold
//     whose renewal stays unconfirmed until its deadline is lost.
//   - relock.watchdog.renewal.failed_holds (counter;
//     relock_watchdog_renewal_failed_holds_total): the holds those rounds
//     could not renew, summed over rounds: how much of the process's work
//     was at risk, where the failures counter says how often.
//
// # Attributes
//
// Lock instruments carry relock.lock.type ("mutex", "reentrant", "fair",
// "rwlock", "semaphore", "redlock" or "election", whose holds are
// leaderships; a latch has no holds and records nothing) and, for an rwlock's acquires and releases, relock.lock.mode
// ("read" or "write"). relock.lock.held and relock.lock.losses carry the
// type only: an rwlock hold may begin with a write and end with a read
// unlock, and a loss ends both. The watchdog counters have no attributes:
// one round renews the holds of every lock.
//
// Lock names and owners are deliberately never attributes: names are
// unbounded (a lock per user, per job, per row), and every distinct value
// would be a new time series in every backend. To find which lock is slow,
// stuck or lost, use relock.WithLogger (it logs losses and failures with
// the name and the owner's fingerprint) and the relock command's inspect.
//
// # Wiring
//
// Give WithMetrics the MeterProvider of the application (nil for the
// global one) when making the Client; with a Prometheus exporter:
//
//	// go.opentelemetry.io/otel/exporters/prometheus
//	exp, err := prometheus.New(prometheus.WithoutScopeInfo())
//	if err != nil { ... }
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
//	client := relock.New(rdb, relockotel.WithMetrics(mp))
//
// and serve promhttp.Handler() (or the registry given to the exporter with
// prometheus.WithRegisterer). WithoutScopeInfo leaves out the labels
// otel_scope_name, otel_scope_version and otel_scope_schema_url that the
// exporter otherwise adds to every series (all relock series have the one
// scope, ScopeName); alerts.yaml works with or without them. alerts.yaml, next to this file, holds
// Prometheus alerting rules on these metrics, written for the exporter's
// default naming (otlptranslator.UnderscoreEscapingWithSuffixes); its
// README explains each alert and what to do when it fires.
//
// Recording costs a few atomic adds per event and allocates nothing for the
// lock types and modes this version knows.
//
// # Tracing
//
// WithTracing records a span (SpanAcquire) for each acquire that took at
// least 10ms (WithMinWait: in practice, the acquires that waited for the
// lock) or that failed (a timeout, a refusal, a Redis error), from the
// call's start to its outcome, and a span (SpanLost) for each hold that
// was lost, from the hold's start to its loss, with the cause. Spans carry
// the lock's type, name and mode and the owner's fingerprint: unlike
// metrics, where each value is a time series, a span may name its lock.
// Owner tokens never appear. Tracing is off unless WithTracing is given.
//
// relock's events carry neither the acquire call's context, nor the
// number of attempts, nor whether a release handed the lock over: the
// spans have no parent (each begins a trace of its own) and no such
// attributes. See WithTracing for each span's attributes.
//
// # Versions
//
// relock (github.com/relock-go/relock) and this module are versioned and
// tagged apart, in the one repository: relock by tags vX.Y.Z, this module
// by tags extra/relockotel/vX.Y.Z (the module's directory, then its
// version, as the go command expects of a module in a subdirectory).
// Users require this module by its own version, which brings relock at
// the release it requires, or a later one the user asks for:
//
//	go get github.com/relock-go/relock/extra/relockotel@v0.1.0
//
// This module's go.mod requires the oldest relock release it works with
// (v0.1.0, the first tag) and replaces it with the repository's root
// (replace github.com/relock-go/relock => ../..), so that in the
// repository it builds and is tested against the relock beside it. The
// go command applies replace directives only of the main module: a user's
// build ignores that one and uses the relock release required.
//
// README.md, next to this file, says how both are tagged at a release.
//
// Its versions need not follow relock's: a fix here is a new
// extra/relockotel tag alone.
package relockotel

// Package relockotel records OpenTelemetry metrics of relock's locks: how
// many acquires succeed and fail, how long they wait, how long holds last,
// how many are held now, and how many are lost or fail to renew.
//
// It is a nested module (github.com/relock-go/relock/extra/relockotel), so
// relock itself does not depend on OpenTelemetry. WithMetrics is a
// relock.Option: it adds an observer (relock.WithObserver) that turns each
// relock.Event into measurements on instruments created once.
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
// "rwlock", "semaphore" or "redlock"; a latch has no holds and records
// nothing) and, for an rwlock's acquires and releases, relock.lock.mode
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
//	exp, err := prometheus.New() // go.opentelemetry.io/otel/exporters/prometheus
//	if err != nil { ... }
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
//	client := relock.New(rdb, relockotel.WithMetrics(mp))
//
// and serve promhttp.Handler() (or the registry given to the exporter with
// prometheus.WithRegisterer). alerts.yaml, next to this file, holds
// Prometheus alerting rules on these metrics, written for the exporter's
// default naming (otlptranslator.UnderscoreEscapingWithSuffixes); its
// README explains each alert and what to do when it fires.
//
// Recording costs a few atomic adds per event and allocates nothing for the
// lock types and modes this version knows.
package relockotel

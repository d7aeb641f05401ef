package relockotel_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/mutex"
)

// Example wires relock's metrics to Prometheus through the OpenTelemetry
// Prometheus exporter, takes and releases a mutex, and scrapes the
// registry's /metrics handler.
func Example() {
	ctx := context.Background()

	// The exporter registers with its own registry here; served by
	// promhttp.HandlerFor(reg, ...) on /metrics.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(ctx)

	srv, err := miniredis.Run() // a Redis server, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	client := relock.New(rdb, relockotel.WithMetrics(mp))
	defer client.Close()

	m := mutex.New(client, "nightly-report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// ... the critical section ...
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// Scrape /metrics and show two of the series.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "relock_lock_acquisitions_total") || strings.HasPrefix(line, "relock_lock_held") {
			fmt.Println(line)
		}
	}
	// Output:
	// relock_lock_acquisitions_total{relock_lock_outcome="acquired",relock_lock_type="mutex"} 1
	// relock_lock_held{relock_lock_type="mutex"} 0
}

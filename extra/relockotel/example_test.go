package relockotel_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// ExampleWithTracing records the spans of an acquire that gave up and of
// one that waited for the holder's unlock. (The holder's own acquire did
// not wait: it has no span, unless it took 10ms.)
func ExampleWithTracing() {
	ctx := context.Background()
	// In production: sdktrace.WithBatcher(exporter), e.g. an OTLP exporter.
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	srv, err := miniredis.Run() // a Redis server, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client := relock.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}), relockotel.WithTracing(tp))
	defer client.Close()

	holder, waiter := mutex.New(client, "nightly-report"), mutex.New(client, "nightly-report")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_ = waiter.Lock(tctx) // gives up after 20ms
	cancel()
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = holder.Unlock(ctx)
	}()
	_ = relock.Do(ctx, waiter, func(ctx context.Context) error { return nil }) // waits for the unlock

	for _, s := range exp.GetSpans() {
		at := map[attribute.Key]string{}
		for _, kv := range s.Attributes {
			at[kv.Key] = kv.Value.String()
		}
		if at["relock.lock.owner"] != waiter.Fingerprint() {
			continue // the holder's
		}
		line := []string{s.Name, at["relock.lock.type"], at["relock.lock.name"], at["relock.lock.outcome"]}
		if e, ok := at["error.type"]; ok {
			line = append(line, e)
		}
		fmt.Println(strings.Join(line, " "))
	}
	// Output:
	// relock.lock.acquire mutex nightly-report failed timeout
	// relock.lock.acquire mutex nightly-report acquired
}

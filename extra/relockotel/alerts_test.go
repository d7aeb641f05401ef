package relockotel_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.yaml.in/yaml/v3"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/rwlock"
)

// The Prometheus names of the instruments, as the OpenTelemetry Prometheus
// exporter exposes them by default. alerts.yaml, the README and dashboards
// use them.
var wantFamilies = []string{
	"relock_lock_acquisitions_total",
	"relock_lock_held",
	"relock_lock_hold_duration_seconds",
	"relock_lock_losses_total",
	"relock_lock_wait_duration_seconds",
	"relock_watchdog_renewal_failed_holds_total",
	"relock_watchdog_renewal_failures_total",
}

// exposition records every kind of event through WithMetrics into the
// OpenTelemetry Prometheus exporter (default naming, fresh registry) and
// returns what a scrape would read. It is made once per test binary.
func exposition(t *testing.T) string {
	t.Helper()
	expositionOnce.Lock()
	defer expositionOnce.Unlock()
	if expositionOnce.text == "" {
		expositionOnce.text = record(t)
	}
	return expositionOnce.text
}

var expositionOnce struct {
	sync.Mutex
	text string
}

func record(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	require.NoError(t, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })

	srv := miniredis.RunT(t)
	srv.ClockTTL(true)
	var failing atomic.Bool
	rdb := newRedisClient(t, srv.Addr(), &failing)
	renewalFailed := make(chan struct{}, 1)
	// A lease long enough that the holder keeps it however loaded the
	// machine, short enough that renewals (every 500ms) fail soon.
	c := relock.New(rdb, relockotel.WithMetrics(mp), relock.WithWatchdogTimeout(1500*time.Millisecond),
		relock.WithObserver(func(e relock.Event) {
			if e.Type == relock.EventRenewalFailed {
				select {
				case renewalFailed <- struct{}{}:
				default:
				}
			}
		}))
	t.Cleanup(func() { _ = c.Close() })

	// An rwlock, so that relock_lock_mode appears too.
	name := uniqueName(t)
	a, b := rwlock.New(c, name), rwlock.New(c, name)
	require.NoError(t, a.RLock(ctx))
	require.NoError(t, a.RUnlock(ctx)) // released
	require.NoError(t, a.Lock(ctx))    // acquired
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	require.ErrorIs(t, b.Lock(tctx), relock.ErrNotObtained, "holder's loss: %v", a.LostErr()) // failed
	cancel()
	failing.Store(true)
	select {
	case <-renewalFailed: // renewal failure
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal round failed")
	}
	failing.Store(false)
	require.NoError(t, rdb.Del(ctx, "relock:rwlock:{"+name+"}").Err())
	select {
	case <-a.Lost(): // lost
	case <-time.After(5 * time.Second):
		t.Fatal("the hold was not lost")
	}
	require.ErrorIs(t, a.Unlock(ctx), relock.ErrNotHeld)

	var buf bytes.Buffer
	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		buf.Reset()
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			require.NoError(t, enc.Encode(mf))
		}
		// The loss reaches the observers after Lost fires.
		return strings.Contains(buf.String(), "\nrelock_lock_losses_total{")
	}, 5*time.Second, 5*time.Millisecond, "no loss recorded")
	return buf.String()
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// parseExposition returns the metric families (from # TYPE lines), the
// sample names and the label names of a text exposition.
func parseExposition(t *testing.T, text string) (families, samples, labels map[string]bool) {
	t.Helper()
	families, samples, labels = map[string]bool{}, map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = true
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		samples[m[1]] = true
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = true
		}
	}
	require.NoError(t, sc.Err())
	return families, samples, labels
}

// TestExposition pins the Prometheus names: a renamed instrument, a changed
// unit or a change in the exporter's naming fails here.
func TestExposition(t *testing.T) {
	text := exposition(t)
	families, samples, labels := parseExposition(t, text)
	var got []string
	for f := range families {
		if strings.HasPrefix(f, "relock_") {
			got = append(got, f)
		}
	}
	sort.Strings(got)
	assert.Equal(t, wantFamilies, got, "exposition:\n%s", text)
	for _, s := range []string{
		"relock_lock_wait_duration_seconds_bucket", "relock_lock_wait_duration_seconds_sum", "relock_lock_wait_duration_seconds_count",
		"relock_lock_hold_duration_seconds_bucket", "relock_lock_hold_duration_seconds_count",
	} {
		assert.Truef(t, samples[s], "no %s samples in:\n%s", s, text)
	}
	for _, l := range []string{"relock_lock_type", "relock_lock_mode", "relock_lock_outcome", "relock_lock_loss_reason"} {
		assert.Truef(t, labels[l], "no label %s in:\n%s", l, text)
	}
	if testing.Verbose() {
		t.Logf("exposition:\n%s", text)
	}
}

// ruleFile is the part of a Prometheus rule file the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var relockName = regexp.MustCompile(`\brelock_[a-zA-Z0-9_]+`)

// TestAlerts checks that alerts.yaml parses, that every rule says what to
// do, and that every relock_ name its expressions use, as a metric or as a
// label, is one the exporter exposes for WithMetrics.
func TestAlerts(t *testing.T) {
	src, err := os.ReadFile("alerts.yaml")
	require.NoError(t, err)
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rf))
	require.NotEmpty(t, rf.Groups)

	_, samples, labels := parseExposition(t, exposition(t))
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		require.NotEmpty(t, g.Name, "group name")
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "alert name (recording rules do not belong here)")
			assert.Falsef(t, alerts[r.Alert], "alert %s defined twice", r.Alert)
			alerts[r.Alert] = true
			assert.NotEmptyf(t, r.Labels["severity"], "%s: severity label", r.Alert)
			assert.NotEmptyf(t, r.Annotations["summary"], "%s: summary", r.Alert)
			assert.NotEmptyf(t, r.Annotations["description"], "%s: description", r.Alert)
			if r.For != "" {
				_, err := time.ParseDuration(r.For)
				assert.NoErrorf(t, err, "%s: for", r.Alert)
			}
			names := relockName.FindAllString(r.Expr, -1)
			assert.NotEmptyf(t, names, "%s uses no relock metric", r.Alert)
			for _, n := range names {
				assert.Truef(t, samples[n] || labels[n], "%s: %s is not a series or label the exporter exposes", r.Alert, n)
			}
			assert.Equalf(t, strings.Count(r.Expr, "("), strings.Count(r.Expr, ")"), "%s: unbalanced parentheses", r.Alert)
		}
	}
	for _, a := range []string{"RelockHoldsLost", "RelockRenewalFailing", "RelockSlowAcquires", "RelockHoldStuck"} {
		assert.Truef(t, alerts[a], "alert %s missing", a)
	}
}

package relockotel

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/relock-go/relock"
)

// A hold's events, as the lock path gives them to the observer.
var holdEvents = []relock.Event{
	{Type: relock.EventAcquired, Kind: "rwlock", Name: "n", Mode: "write", Owner: "0123abcd", Wait: time.Millisecond},
	{Type: relock.EventReleased, Kind: "rwlock", Name: "n", Mode: "read", Owner: "0123abcd", Held: time.Second},
	{Type: relock.EventFailed, Kind: "mutex", Name: "n", Owner: "0123abcd", Wait: time.Second, Err: context.DeadlineExceeded},
	{Type: relock.EventAcquired, Kind: "fair", Name: "n", Owner: "0123abcd", Wait: time.Millisecond},
	{Type: relock.EventLost, Kind: "fair", Name: "n", Owner: "0123abcd", Held: time.Minute},
	{Type: relock.EventAcquired, Kind: "semaphore", Name: "n", Owner: "0123abcd", Wait: time.Millisecond},
	{Type: relock.EventReleased, Kind: "redlock", Name: "n", Owner: "0123abcd", Held: time.Second},
	{Type: relock.EventAcquired, Kind: "election", Name: "n", Owner: "0123abcd", Wait: time.Millisecond},
	{Type: relock.EventLost, Kind: "election", Name: "n", Owner: "0123abcd", Held: time.Minute},
	{Type: relock.EventRenewalFailed, Holds: 3},
}

func newSDKRecorder(t testing.TB) *recorder {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return newRecorder(mp.Meter(ScopeName))
}

// Recording an event of a known lock type allocates nothing: the
// attribute sets are built once.
func TestObserveAllocs(t *testing.T) {
	r := newSDKRecorder(t)
	for _, e := range holdEvents {
		r.observe(e) // the SDK allocates each series once
	}
	for _, e := range holdEvents {
		if got := testing.AllocsPerRun(100, func() { r.observe(e) }); got != 0 {
			t.Errorf("%v event: got %v allocations, want 0", e.Type, got)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	r := newSDKRecorder(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.observe(holdEvents[i%len(holdEvents)])
			i++
		}
	})
}

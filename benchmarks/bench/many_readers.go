package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// manyReadersLease is the watchdog lease of the many-readers scenario: its
// renewal rounds (every third of it) stay out of the measurement windows,
// which then hold only the probe's calls.
const manyReadersLease = 60 * time.Second

// ManyReaders measures a read/write lock held for reading by n readers
// (handles spread over up to four Conns): a probe on a Conn of its own
// takes and gives back a read hold in a loop, then tries the write lock
// (TryLock, refused while the readers hold) in a loop, half the duration
// each. On a real server it reports the server's script time per call of
// each (INFO commandstats over each window), and the Redis memory per
// reader; everywhere, the client's times (Latency: the probe's
// RLock+RUnlock). Kinds without a read side do not apply.
func ManyReaders(ctx context.Context, cfg Config, k Kind, n int) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioManyReaders, Count: n}
	opts := OpenOptions{WatchdogTimeout: manyReadersLease}
	cnt := &Counter{}
	conns, err := openConnsWith(k, cfg.Server, cnt, min(n, maxConns), opts)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeConns(conns)
	probeCnt := &Counter{}
	probeConns, err := openConnsWith(k, cfg.Server, probeCnt, 1, opts)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeConns(probeConns)

	name := UniqueName("readers")
	reader, ok1 := probeConns[0].New(name).(RLocker)
	writer, ok2 := probeConns[0].New(name).(TryLocker)
	if !ok1 || !ok2 {
		res.Err = "needs RLock and TryLock"
		return res
	}
	readers := make([]Locker, n)
	for i := range readers {
		l, ok := conns[i%len(conns)].New(name).(RLocker)
		if !ok {
			res.Err = "needs RLock"
			return res
		}
		readers[i] = rlockAsLock{l}
	}
	// Warm up: scripts, pools.
	if err := cycleOnce(ctx, rlockAsLock{reader}); err != nil {
		res.Err = err.Error()
		return res
	}
	if err := cycleOnce(ctx, writer); err != nil {
		res.Err = err.Error()
		return res
	}

	st := &ManyReadersStats{Readers: n}
	t0 := time.Now()
	lockAll := func(l Locker) error {
		lctx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
		defer cancel()
		return l.Lock(lctx)
	}
	if err := forAll(readers, lockAll); err != nil {
		res.Err = fmt.Sprintf("readers: %v", err)
		_ = forAll(readers, func(l Locker) error { _ = l.Unlock(ctx); return nil })
		return res
	}
	st.SetupSecs = time.Since(t0).Seconds()
	defer func() {
		_ = forAll(readers, func(l Locker) error { _ = l.Unlock(ctx); return nil })
	}()
	if b, ok := keyBytes(ctx, cfg.Server, name); ok {
		st.BytesPerReader = float64(b) / float64(n)
	}

	half := cfg
	half.Duration = cfg.Duration / 2
	cfg.started()
	start := time.Now()
	// Reads.
	var lat []time.Duration
	w := cfg.Server.openWindow(ctx)
	p0 := probeCnt.Snapshot()
	for b := half.budget(); b.next(); {
		t := time.Now()
		if err := reader.RLock(ctx); err != nil {
			res.Err = fmt.Sprintf("probe rlock: %v", err)
			return res
		}
		if err := reader.RUnlock(ctx); err != nil {
			res.Err = fmt.Sprintf("probe runlock: %v", err)
			return res
		}
		lat = append(lat, time.Since(t))
	}
	pd := probeCnt.Snapshot().Sub(p0)
	if st.Read = w.close(ctx, int64(len(lat))); st.Read != nil {
		st.Extra += st.Read.Calls - pd.Commands
	}
	res.Ops = int64(len(lat))
	res.Latency = Summarize(lat)
	res.CmdsPerOp = float64(pd.Commands) / float64(res.Ops)
	res.TripsPerOp = float64(pd.RoundTrips) / float64(res.Ops)
	res.OpsPerSec = float64(res.Ops) / time.Since(start).Seconds()

	// Write attempts.
	var wlat []time.Duration
	w = cfg.Server.openWindow(ctx)
	p0 = probeCnt.Snapshot()
	for b := half.budget(); b.next(); {
		t := time.Now()
		ok, err := writer.TryLock(ctx)
		if err == nil && ok {
			err = errors.New("granted while readers hold")
		}
		if err != nil {
			res.Err = fmt.Sprintf("probe write attempt: %v", err)
			return res
		}
		wlat = append(wlat, time.Since(t))
	}
	pd = probeCnt.Snapshot().Sub(p0)
	if st.Write = w.close(ctx, int64(len(wlat))); st.Write != nil {
		st.Extra += st.Write.Calls - pd.Commands
	}
	st.WriteAttempt = Summarize(wlat)
	st.ReadCycle = res.Latency
	res.Seconds = time.Since(start).Seconds()
	if st.Extra != 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d script calls in the windows were not the probe's", st.Extra))
	}
	res.ManyReaders = st
	return res
}

// rlockAsLock makes an RLocker's read side a Locker.
type rlockAsLock struct{ l RLocker }

func (r rlockAsLock) Lock(ctx context.Context) error   { return r.l.RLock(ctx) }
func (r rlockAsLock) Unlock(ctx context.Context) error { return r.l.RUnlock(ctx) }

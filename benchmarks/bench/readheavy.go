package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ReadHeavy runs cfg.Readers readers and cfg.Writers writers (9:1 by
// default) on one name, each holding for cfg.Hold in a loop. Readers use
// RLock when the kind has a read side (RLocker), Lock otherwise (the
// exclusive baseline). It reports reads and writes per second, how many
// readers were inside together, the waits of both sides (a starved writer
// shows), and violations: a writer inside with anyone else.
func ReadHeavy(ctx context.Context, cfg Config, k Kind) Result {
	cfg = cfg.withDefaults()
	res := Result{Kind: k.Name, Peer: k.Peer, Scenario: ScenarioReadHeavy}
	n := cfg.Readers + cfg.Writers
	cnt := &Counter{}
	conns, err := openConns(k, cfg.Server, cnt, min(n, maxConns))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeConns(conns)

	name := UniqueName("readheavy")
	owners := make([]Locker, n)
	for i := range owners {
		owners[i] = conns[i%len(conns)].New(name)
	}
	_, shared := owners[0].(RLocker)
	st := &ReadHeavyStats{Readers: cfg.Readers, Writers: cfg.Writers, Shared: shared, Hold: cfg.Hold}
	for i := 0; i < len(conns); i++ {
		if err := cycleOnce(ctx, owners[i]); err != nil {
			res.Err = err.Error()
			return res
		}
	}

	var (
		readersIn, writersIn atomic.Int64
		violations           atomic.Int64
		errs                 atomic.Int64
		maxReaders           atomic.Int64
		readerSum            atomic.Int64
		reads, writes        atomic.Int64
		tickets              atomic.Int64
	)
	tickets.Store(int64(cfg.Ops))
	stopAfter := cfg.Duration
	if cfg.Ops > 0 {
		stopAfter = cfg.WaitTimeout + time.Duration(cfg.Ops)*time.Second
	}

	cfg.started()
	c0 := cnt.Snapshot()
	stop, cancel := context.WithTimeout(ctx, stopAfter)
	defer cancel()
	// The commands are counted until the end of the measurement: owners
	// still waiting then leave the lock's queue, which is no cost of an
	// acquisition.
	endCount := make(chan Count, 1)
	context.AfterFunc(stop, func() { endCount <- cnt.Snapshot() })
	start := time.Now()
	readWaits := make([][]time.Duration, n)
	writeWaits := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range owners {
		writer := i >= cfg.Readers
		l := owners[i]
		lock, unlock := l.Lock, l.Unlock
		if rl, ok := l.(RLocker); ok && !writer {
			lock, unlock = rl.RLock, rl.RUnlock
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for stop.Err() == nil {
				if cfg.Ops > 0 && tickets.Add(-1) < 0 {
					return
				}
				t0 := time.Now()
				if err := lock(stop); err != nil {
					if stop.Err() != nil {
						return
					}
					errs.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				w := time.Since(t0)
				// Each side announces itself, then looks at the other: if
				// the lock let both in, at least one of them sees it.
				if writer {
					writeWaits[i] = append(writeWaits[i], w)
					if writersIn.Add(1) > 1 || readersIn.Load() > 0 {
						violations.Add(1)
					}
				} else {
					readWaits[i] = append(readWaits[i], w)
					r := readersIn.Add(1)
					if writersIn.Load() > 0 {
						violations.Add(1)
					}
					maxInt64(&maxReaders, r)
					readerSum.Add(r)
				}
				if cfg.Hold > 0 {
					time.Sleep(cfg.Hold)
				}
				if writer {
					writersIn.Add(-1)
					writes.Add(1)
				} else {
					readersIn.Add(-1)
					reads.Add(1)
				}
				uctx, ucancel := context.WithTimeout(ctx, cfg.WaitTimeout)
				if err := unlock(uctx); err != nil {
					errs.Add(1)
				}
				ucancel()
			}
		}(i)
	}
	if !waitTimeout(&wg, stopAfter+cfg.WaitTimeout+5*time.Second) {
		res.Stalled = true
		res.Err = fmt.Sprintf("%v: owners had not returned %v after the end of the measurement", errStalled, cfg.WaitTimeout+5*time.Second)
		return res
	}
	res.Seconds = time.Since(start).Seconds()
	var rw, ww []time.Duration
	for i := range owners {
		rw = append(rw, readWaits[i]...)
		ww = append(ww, writeWaits[i]...)
	}
	res.Ops = reads.Load() + writes.Load()
	if res.Ops == 0 {
		res.Err = "no acquisition completed"
		return res
	}
	c1 := cnt.Snapshot()
	if cfg.Ops == 0 {
		select {
		case c1 = <-endCount:
		default:
		}
	}
	d := c1.Sub(c0)
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CmdsPerOp = float64(d.Commands) / float64(res.Ops)
	res.TripsPerOp = float64(d.RoundTrips) / float64(res.Ops)
	res.Errors = errs.Load()
	res.Violations = violations.Load()
	st.ReadsPerSec = float64(reads.Load()) / res.Seconds
	st.WritesPerSec = float64(writes.Load()) / res.Seconds
	st.ReadWait = Summarize(rw)
	st.WriteWait = Summarize(ww)
	res.Latency = st.ReadWait
	st.MaxReaders = maxReaders.Load()
	if r := reads.Load(); r > 0 {
		st.MeanReaders = float64(readerSum.Load()) / float64(r)
	}
	res.ReadHeavy = st
	return res
}

package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// Scenarios lists every scenario in the order a run measures them.
// The redis-memory scenario comes first: the request records that other
// scenarios leave expire for a while after them, which would move the
// server's memory while it measures. The server-cost scenario comes next,
// before the keys that other scenarios leave expire (which costs the
// server CPU).
var Scenarios = []string{
	ScenarioMemory, ScenarioServerCost, ScenarioUncontended, ScenarioHandoff, ScenarioHandoffContended, ScenarioContention,
	ScenarioReadHeavy, ScenarioManyReaders, ScenarioManyWaiters, ScenarioManyLocks, ScenarioWatchdog,
}

// QuickScenarios are what a run on the embedded miniredis measures by
// default: the scenarios of the summary, for a first look in well under a
// minute. Its figures are not Redis figures either way.
var QuickScenarios = []string{ScenarioUncontended, ScenarioHandoff, ScenarioContention, ScenarioManyLocks}

// QuickDuration is the length of one measurement of the quick tour.
const QuickDuration = 500 * time.Millisecond

// Plan is what a run measures: every scenario for every kind (and every
// number of contenders, readers or waiters), scenario by scenario so that
// the figures compared with each other are measured close together in
// time.
type Plan struct {
	Kinds     []Kind
	Scenarios []string
	// Contenders are the contention scenario's owner counts, Readers the
	// many-readers scenario's reader counts, Waiters the many-waiters
	// scenario's waiter counts.
	Contenders []int
	Readers    []int
	Waiters    []int
}

// job is one measurement of a plan.
type job struct {
	kind     Kind
	scenario string
	count    int  // contenders, readers or waiters
	read     bool // the read side (server-cost)
}

func (j job) label() string {
	if j.read {
		return j.scenario + " read"
	}
	if j.scenario == ScenarioContention {
		return label(j.scenario, j.count, 0)
	}
	return label(j.scenario, 0, j.count)
}

func (p Plan) jobs() []job {
	var out []job
	for _, s := range p.Scenarios {
		counts := []int{0}
		switch s {
		case ScenarioContention:
			counts = p.Contenders
		case ScenarioManyReaders:
			counts = p.Readers
		case ScenarioManyWaiters:
			counts = p.Waiters
		}
		for _, k := range p.Kinds {
			if len(k.Only) > 0 && !slices.Contains(k.Only, s) {
				continue
			}
			for _, c := range counts {
				out = append(out, job{kind: k, scenario: s, count: c})
			}
			if s == ScenarioServerCost && k.Shared {
				out = append(out, job{kind: k, scenario: s, read: true})
			}
		}
	}
	return out
}

// skip says why a scenario does not apply to a kind, or "".
func skip(k Kind, scenario string) string {
	switch {
	case k.Masters > 0 && !slices.Contains(multiScenarios, scenario):
		return "multi-master kinds run the uncontended and hand-off scenarios only"
	case k.Cluster != nil && !slices.Contains(multiScenarios, scenario):
		return "cluster kinds run the uncontended and hand-off scenarios only"
	case scenario == ScenarioReadHeavy && !k.Shared && !k.Baseline,
		scenario == ScenarioManyReaders && !k.Shared:
		return "no read/write lock"
	case scenario == ScenarioManyWaiters && !k.Queue:
		return "no queue in Redis (waiters poll or wait for invalidations)"
	case scenario == ScenarioWatchdog && !k.Renews:
		return "no automatic renewal (the caller extends each lock)"
	}
	return ""
}

// result is an empty Result for j.
func (j job) result() Result {
	r := Result{Kind: j.kind.Name, Peer: j.kind.Peer, Masters: j.kind.Masters, Cluster: j.kind.clusterMasters(), Scenario: j.scenario, Read: j.read}
	switch j.scenario {
	case ScenarioContention:
		r.Contenders = j.count
	case ScenarioManyReaders, ScenarioManyWaiters:
		r.Count = j.count
	}
	return r
}

// Run measures plan with cfg, reporting progress to progress (nil for
// none), and returns one Result per measurement. A measurement that does
// not end long after its budget is abandoned and reported as stalled; its
// goroutines are left behind.
func Run(ctx context.Context, cfg Config, plan Plan, progress io.Writer) []Result {
	cfg = cfg.withDefaults()
	jobs := plan.jobs()
	est := make([]time.Duration, len(jobs))
	var total time.Duration
	for i, j := range jobs {
		est[i] = j.estimate(cfg)
		total += est[i]
	}
	if progress != nil && len(jobs) > 0 {
		fmt.Fprintf(progress, "%s, about %s\n", count(len(jobs), "measurement"), total.Round(time.Second))
	}
	p := newProgress(progress, est)
	defer p.finish()
	var out []Result
	for i, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		p.start(i, j.kind.Name+"  "+j.label())
		if why := skip(j.kind, j.scenario); why != "" {
			r := j.result()
			r.Skipped = why
			out = append(out, r)
			continue
		}
		r := runGuarded(ctx, cfg, j)
		r.Masters, r.Cluster = j.kind.Masters, j.kind.clusterMasters()
		if r.Masters > 0 || r.Cluster > 0 {
			r.SubsPerOp = nil // counted on the single server, which the kind does not use
		}
		out = append(out, r)
	}
	return out
}

// estimate is about how long j takes with cfg, for the progress line.
func (j job) estimate(cfg Config) time.Duration {
	if skip(j.kind, j.scenario) != "" {
		return 0
	}
	d := cfg.Duration
	if cfg.Ops > 0 {
		d = 100 * time.Millisecond
	}
	setup := 200 * time.Millisecond
	if cfg.Server != nil && !cfg.Server.Real() {
		setup = 400 * time.Millisecond // miniredis shares this process's CPUs
	}
	switch j.scenario {
	case ScenarioHandoff:
		// At least handoffMinSamples hand-offs, each with its floor and
		// an idle PING after a hold.
		return max(d, handoffMinSamples*3*cfg.HandoffHold*3/2) + setup
	case ScenarioManyWaiters:
		return d + time.Duration(j.count)*20*time.Millisecond + setup
	case ScenarioManyReaders:
		return d + time.Duration(j.count)*5*time.Millisecond + setup
	case ScenarioManyLocks:
		return d + 2*setup
	case ScenarioWatchdog:
		return time.Duration(cfg.WatchdogPeriods)*cfg.WatchdogTimeout + time.Duration(cfg.WatchdogLocks)*time.Millisecond/2 + 2*time.Second
	case ScenarioMemory:
		return 6*allocSettle + recordWindow + recordWait + time.Duration(cfg.MemoryLocks+cfg.MemoryWaiters)*time.Millisecond + setup
	case ScenarioServerCost:
		e := time.Duration(serverCostBlocks)*(2*serverCostSettle+100*time.Millisecond) + setup
		if !j.read {
			e += d
		}
		return e
	}
	return d + setup
}

// runGuarded runs j, abandoning it if it does not end in time.
func runGuarded(ctx context.Context, cfg Config, j job) Result {
	guard := 3*cfg.Duration + 2*cfg.WaitTimeout + 30*time.Second
	switch j.scenario {
	case ScenarioWatchdog:
		// Taking and releasing the locks: allow 1ms each.
		guard += time.Duration(cfg.WatchdogPeriods)*cfg.WatchdogTimeout + 60*time.Second +
			time.Duration(cfg.WatchdogLocks)*time.Millisecond
	case ScenarioManyWaiters:
		guard += warmupMax + time.Duration(j.count)*10*time.Millisecond
	case ScenarioManyReaders:
		guard += time.Duration(j.count) * 10 * time.Millisecond
	case ScenarioMemory:
		guard += 60*time.Second + time.Duration(cfg.MemoryLocks+cfg.MemoryWaiters)*10*time.Millisecond
	case ScenarioServerCost:
		guard += time.Duration(serverCostBlocks)*(2*serverCostSettle+3*serverCostCycles*10*time.Millisecond) + warmupMax
	}
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				r := j.result()
				r.Err = fmt.Sprintf("panic: %v", v)
				done <- r
			}
		}()
		done <- measure(jctx, cfg, j)
	}()
	t := time.NewTimer(guard)
	defer t.Stop()
	select {
	case r := <-done:
		return r
	case <-t.C:
	}
	cancel()
	t.Reset(5 * time.Second)
	select {
	case r := <-done:
		r.Stalled = true
		r.Notes = append(r.Notes, fmt.Sprintf("ran past %v; ended only when its context was cancelled", guard))
		return r
	case <-t.C:
	}
	r := j.result()
	r.Stalled = true
	r.Err = fmt.Sprintf("stalled: no result %v after start, nor 5s after cancelling its context; abandoned", guard)
	return r
}

func measure(ctx context.Context, cfg Config, j job) Result {
	switch j.scenario {
	case ScenarioUncontended:
		return Uncontended(ctx, cfg, j.kind)
	case ScenarioHandoff:
		return Handoff(ctx, cfg, j.kind)
	case ScenarioHandoffContended:
		return HandoffContended(ctx, cfg, j.kind)
	case ScenarioContention:
		return Contention(ctx, cfg, j.kind, j.count)
	case ScenarioReadHeavy:
		return ReadHeavy(ctx, cfg, j.kind)
	case ScenarioManyReaders:
		return ManyReaders(ctx, cfg, j.kind, j.count)
	case ScenarioManyWaiters:
		return ManyWaiters(ctx, cfg, j.kind, j.count)
	case ScenarioManyLocks:
		return ManyLocks(ctx, cfg, j.kind)
	case ScenarioWatchdog:
		return Watchdog(ctx, cfg, j.kind)
	case ScenarioMemory:
		return Memory(ctx, cfg, j.kind)
	case ScenarioServerCost:
		return ServerCost(ctx, cfg, j.kind, j.read)
	}
	return Result{Kind: j.kind.Name, Scenario: j.scenario, Err: "unknown scenario"}
}

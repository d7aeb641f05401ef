package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Scenarios lists every scenario in the order a run measures them.
var Scenarios = []string{ScenarioUncontended, ScenarioHandoff, ScenarioContention, ScenarioReadHeavy, ScenarioWatchdog}

// Plan is what a run measures: every scenario for every kind (and every
// number of contenders), scenario by scenario so that the figures compared
// with each other are measured close together in time.
type Plan struct {
	Kinds      []Kind
	Scenarios  []string
	Contenders []int
}

// job is one measurement of a plan.
type job struct {
	kind       Kind
	scenario   string
	contenders int
}

func (j job) label() string {
	if j.scenario == ScenarioContention {
		return fmt.Sprintf("%s c=%d", j.scenario, j.contenders)
	}
	return j.scenario
}

func (p Plan) jobs() []job {
	var out []job
	for _, s := range p.Scenarios {
		for _, k := range p.Kinds {
			if s != ScenarioContention {
				out = append(out, job{kind: k, scenario: s})
				continue
			}
			for _, c := range p.Contenders {
				out = append(out, job{kind: k, scenario: s, contenders: c})
			}
		}
	}
	return out
}

// skip says why a scenario does not apply to a kind, or "".
func skip(k Kind, scenario string) string {
	switch {
	case scenario == ScenarioReadHeavy && !k.Shared && !k.Baseline:
		return "no read/write lock"
	case scenario == ScenarioWatchdog && !k.Renews:
		return "no automatic renewal (the caller extends each lock)"
	}
	return ""
}

// Run measures plan with cfg, reporting progress to progress (nil for
// none), and returns one Result per measurement. A measurement that does
// not end long after its budget is abandoned and reported as stalled; its
// goroutines are left behind.
func Run(ctx context.Context, cfg Config, plan Plan, progress io.Writer) []Result {
	cfg = cfg.withDefaults()
	jobs := plan.jobs()
	p := newProgress(progress, len(jobs))
	defer p.finish()
	var out []Result
	for i, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		p.start(i, j.kind.Name+"  "+j.label())
		if why := skip(j.kind, j.scenario); why != "" {
			out = append(out, Result{Kind: j.kind.Name, Peer: j.kind.Peer, Scenario: j.scenario, Contenders: j.contenders, Skipped: why})
			continue
		}
		out = append(out, runGuarded(ctx, cfg, j))
	}
	return out
}

// runGuarded runs j, abandoning it if it does not end in time.
func runGuarded(ctx context.Context, cfg Config, j job) Result {
	guard := 3*cfg.Duration + 2*cfg.WaitTimeout + 30*time.Second
	if j.scenario == ScenarioWatchdog {
		guard += time.Duration(cfg.WatchdogPeriods)*cfg.WatchdogTimeout + 60*time.Second
	}
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- Result{Kind: j.kind.Name, Peer: j.kind.Peer, Scenario: j.scenario, Contenders: j.contenders, Err: fmt.Sprintf("panic: %v", v)}
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
	return Result{
		Kind: j.kind.Name, Peer: j.kind.Peer, Scenario: j.scenario, Contenders: j.contenders,
		Stalled: true,
		Err:     fmt.Sprintf("stalled: no result %v after start, nor 5s after cancelling its context; abandoned", guard),
	}
}

func measure(ctx context.Context, cfg Config, j job) Result {
	switch j.scenario {
	case ScenarioUncontended:
		return Uncontended(ctx, cfg, j.kind)
	case ScenarioHandoff:
		return Handoff(ctx, cfg, j.kind)
	case ScenarioContention:
		return Contention(ctx, cfg, j.kind, j.contenders)
	case ScenarioReadHeavy:
		return ReadHeavy(ctx, cfg, j.kind)
	case ScenarioWatchdog:
		return Watchdog(ctx, cfg, j.kind)
	}
	return Result{Kind: j.kind.Name, Scenario: j.scenario, Err: "unknown scenario"}
}

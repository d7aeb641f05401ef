package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cost is what one operation (a lock cycle, an acquisition) cost the
// Redis server and this process: medians over the blocks of a
// measurement, per operation, after the cost of measuring (the INFO calls
// and an idle server over the same time) is taken off.
type Cost struct {
	// Cycle is the operation's wall-clock time.
	Cycle time.Duration `json:"cycle_ns"`
	// ServerCPU is the Redis process's CPU time (INFO cpu:
	// used_cpu_user + used_cpu_sys), network syscalls included.
	ServerCPU time.Duration `json:"server_cpu_ns"`
	// ScriptTime is the time the server spent inside scripts and
	// functions (INFO commandstats usec of EVAL, EVALSHA, FCALL and their
	// _RO forms), the commands they call included.
	ScriptTime time.Duration `json:"script_ns"`
	// ClientCPU is this process's CPU time (getrusage: the library,
	// go-redis, the Go runtime); 0 where unknown.
	ClientCPU time.Duration `json:"client_cpu_ns"`
	// Allocs are the heap objects this process allocated (MemStats.Mallocs,
	// tiny objects included, as -benchmem counts), and Switches the times
	// its threads were switched out (getrusage: voluntary and involuntary
	// context switches; 0 where unknown): where a ClientCPU above the
	// floor's goes, beside the commands.
	Allocs   float64 `json:"allocs"`
	Switches float64 `json:"context_switches"`
	// Commands are the commands the client sent (counted by its hook),
	// ServerCalls every command the server ran (INFO commandstats, the
	// commands called inside scripts included, INFO itself not), and
	// ScriptCalls the scripts and functions among them.
	Commands    float64 `json:"commands"`
	ServerCalls float64 `json:"server_calls"`
	ScriptCalls float64 `json:"script_calls"`
	// Background is the commands the client sent after the operations
	// had returned, while the measurement waited for the client's
	// background work (a sweep of request records) to be done; they are
	// in Commands and ServerCalls too.
	Background float64 `json:"background_commands"`
	// ByCommand is what each command (lower case) that the server ran
	// cost per operation, those called inside scripts included, the
	// scripts themselves and INFO not (INFO commandstats): where the
	// ScriptTime and the ServerCalls go.
	ByCommand map[string]CommandCost `json:"by_command,omitempty"`
}

// CommandCost is what one command cost per operation: how many times it
// ran, and the time Redis spent in it (INFO commandstats usec).
type CommandCost struct {
	Calls float64       `json:"calls"`
	Time  time.Duration `json:"time_ns"`
}

// Inner is the commands run inside scripts per operation: what the
// server ran beyond what the client sent.
func (c Cost) Inner() float64 { return max(0, c.ServerCalls-c.Commands) }

// costProbe reads what a real server has spent so far, on a connection of
// its own (a new connection per reading would cost the server more than
// the reading).
type costProbe struct {
	c *redis.Client
}

func newCostProbe(srv *Server) *costProbe { return &costProbe{c: srv.NewRedis(nil)} }

func (p *costProbe) Close() { _ = p.c.Close() }

// costReading is a server's and this process's totals at one point.
// The process's are read twice, before and after the INFO call: a sample
// counts the process's work from the end of one reading to the start of
// the next, so the readings' own (INFO's reply, its parsing) is not in it
// and no idle sample has to take it off.
type costReading struct {
	at      time.Time
	before  processTotals // taken before the INFO call
	after   processTotals // and after it
	server  time.Duration
	calls   int64 // every command but INFO
	scripts cmdStat
	cmds    map[string]cmdStat // every command but INFO and the scripts
	sent    Count
}

// read returns the totals now: the server's from one INFO call, this
// process's before and after it, and the commands counted by cnt (nil
// for none).
func (p *costProbe) read(ctx context.Context, cnt *Counter) (costReading, error) {
	r := costReading{}
	if cnt != nil {
		r.sent = cnt.Snapshot().withSweeps()
	}
	r.before = readProcess(true)
	r.at = time.Now()
	info, err := p.c.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return r, fmt.Errorf("info: %w", err)
	}
	cpu, ok := parseCPU(info)
	if !ok {
		return r, fmt.Errorf("info: no used_cpu_user/used_cpu_sys")
	}
	r.server = cpu
	st := parseCommandStats(info)
	delete(st, "info")
	for _, s := range st {
		r.calls += s.calls
	}
	r.scripts = scriptStat(st)
	for _, name := range scriptCommands {
		delete(st, name)
	}
	r.cmds = st
	r.after = readProcess(false)
	return r, nil
}

// costSample is what happened between two readings, over n operations
// that took wall (the readings were span apart).
type costSample struct {
	n          int
	wall       time.Duration
	span       time.Duration
	server     time.Duration
	client     time.Duration
	allocs     int64
	swtch      int64
	calls      int64
	scripts    cmdStat
	cmds       map[string]cmdStat
	sent       Count
	background int64
}

func (r costReading) since(o costReading, n int) costSample {
	cmds := map[string]cmdStat{}
	for name, st := range r.cmds {
		if d := st.sub(o.cmds[name]); d.calls > 0 {
			cmds[name] = d
		}
	}
	return costSample{
		cmds:    cmds,
		n:       n,
		wall:    r.at.Sub(o.at),
		span:    r.at.Sub(o.at),
		server:  r.server - o.server,
		client:  r.before.cpu - o.after.cpu,
		allocs:  r.before.allocs - o.after.allocs,
		swtch:   r.before.switches - o.after.switches,
		calls:   r.calls - o.calls,
		scripts: r.scripts.sub(o.scripts),
		sent:    r.sent.Sub(o.sent),
	}
}

// block runs n operations of f between two readings; with settle > 0 it
// then waits settle (the client's background work after the operations
// belongs to them) before the second reading. The sample's wall time is
// the operations' only.
func (p *costProbe) block(ctx context.Context, cnt *Counter, n int, settle time.Duration, f func() error) (costSample, error) {
	r0, err := p.read(ctx, cnt)
	if err != nil {
		return costSample{}, err
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return costSample{}, err
		}
	}
	wall := time.Since(t0)
	var done Count
	if cnt != nil {
		done = cnt.Snapshot().withSweeps()
	}
	if settle > 0 {
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return costSample{}, ctx.Err()
		}
	}
	r1, err := p.read(ctx, cnt)
	if err != nil {
		return costSample{}, err
	}
	s := r1.since(r0, n)
	s.wall = wall
	s.background = r1.sent.Commands - done.Commands
	return s, nil
}

// medianSample is the median of each figure of samples, separately.
func medianSample(samples []costSample) costSample {
	if len(samples) == 0 {
		return costSample{}
	}
	med := func(get func(costSample) int64) int64 {
		v := make([]int64, len(samples))
		for i, s := range samples {
			v[i] = get(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return costSample{
		n:          samples[0].n,
		wall:       time.Duration(med(func(s costSample) int64 { return int64(s.wall) })),
		span:       time.Duration(med(func(s costSample) int64 { return int64(s.span) })),
		server:     time.Duration(med(func(s costSample) int64 { return int64(s.server) })),
		client:     time.Duration(med(func(s costSample) int64 { return int64(s.client) })),
		allocs:     med(func(s costSample) int64 { return s.allocs }),
		swtch:      med(func(s costSample) int64 { return s.swtch }),
		calls:      med(func(s costSample) int64 { return s.calls }),
		scripts:    cmdStat{med(func(s costSample) int64 { return s.scripts.calls }), med(func(s costSample) int64 { return s.scripts.usec })},
		sent:       Count{Commands: med(func(s costSample) int64 { return s.sent.Commands }), RoundTrips: med(func(s costSample) int64 { return s.sent.RoundTrips })},
		background: med(func(s costSample) int64 { return s.background }),
	}
}

// costPerOp is the median over samples of each figure per operation, less
// what idle (a sample of no operation, measured the same way) shows.
func costPerOp(samples []costSample, idle costSample) Cost {
	if len(samples) == 0 {
		return Cost{}
	}
	per := make([]Cost, len(samples))
	for i, s := range samples {
		n := float64(s.n)
		dur := func(d, idle time.Duration) time.Duration { return time.Duration(max(0, float64(d-idle)/n)) }
		cnt := func(v, idle int64) float64 { return max(0, float64(v-idle)/n) }
		per[i] = Cost{
			Cycle:       time.Duration(float64(s.wall) / n),
			ServerCPU:   dur(s.server, idle.server),
			ScriptTime:  dur(time.Duration(s.scripts.usec)*time.Microsecond, time.Duration(idle.scripts.usec)*time.Microsecond),
			ClientCPU:   dur(s.client, idle.client),
			Allocs:      cnt(s.allocs, idle.allocs),
			Switches:    cnt(s.swtch, idle.swtch),
			Commands:    cnt(s.sent.Commands, idle.sent.Commands),
			ServerCalls: cnt(s.calls, idle.calls),
			ScriptCalls: cnt(s.scripts.calls, idle.scripts.calls),
			Background:  cnt(s.background, idle.background),
		}
	}
	medDur := func(get func(Cost) time.Duration) time.Duration {
		v := make([]time.Duration, len(per))
		for i, c := range per {
			v[i] = get(c)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	medNum := func(get func(Cost) float64) float64 {
		v := make([]float64, len(per))
		for i, c := range per {
			v[i] = get(c)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Cost{
		Cycle:       medDur(func(c Cost) time.Duration { return c.Cycle }),
		ServerCPU:   medDur(func(c Cost) time.Duration { return c.ServerCPU }),
		ScriptTime:  medDur(func(c Cost) time.Duration { return c.ScriptTime }),
		ClientCPU:   medDur(func(c Cost) time.Duration { return c.ClientCPU }),
		Allocs:      medNum(func(c Cost) float64 { return c.Allocs }),
		Switches:    medNum(func(c Cost) float64 { return c.Switches }),
		Commands:    medNum(func(c Cost) float64 { return c.Commands }),
		ServerCalls: medNum(func(c Cost) float64 { return c.ServerCalls }),
		ScriptCalls: medNum(func(c Cost) float64 { return c.ScriptCalls }),
		Background:  medNum(func(c Cost) float64 { return c.Background }),
		ByCommand:   byCommand(samples),
	}
}

// byCommand is, for each command that ran in at least half of samples,
// the median over samples of its calls and time per operation (0 in a
// sample where it did not run). The readings' INFO is not in them; what
// an idle server runs meanwhile (nothing, on a server that only the
// benchmark uses) is not taken off, nor are the connections that a
// measurement opens in its window (the contended cycle's HELLO).
func byCommand(samples []costSample) map[string]CommandCost {
	names := map[string]bool{}
	for _, s := range samples {
		for name := range s.cmds {
			names[name] = true
		}
	}
	out := map[string]CommandCost{}
	calls, usec := make([]float64, len(samples)), make([]float64, len(samples))
	for name := range names {
		for i, o := range samples {
			n := float64(max(1, o.n))
			calls[i] = float64(o.cmds[name].calls) / n
			usec[i] = float64(o.cmds[name].usec) / n
		}
		slices.Sort(calls)
		slices.Sort(usec)
		if calls[len(calls)/2] == 0 {
			continue // in fewer than half the samples: not the operation's
		}
		out[name] = CommandCost{Calls: calls[len(calls)/2], Time: time.Duration(usec[len(usec)/2] * float64(time.Microsecond))}
	}
	return out
}

// idleFor is what measuring a window of d costs with no operation in it:
// idle0 (two readings back to back) plus the idle server's and process's
// CPU over d, at the rate that idleS (two readings settle apart) shows.
func idleFor(idle0, idleS costSample, settle, d time.Duration) costSample {
	out := idle0
	if settle <= 0 {
		return out
	}
	f := float64(d) / float64(settle)
	out.server += time.Duration(max(0, float64(idleS.server-idle0.server)*f))
	out.client += time.Duration(max(0, float64(idleS.client-idle0.client)*f))
	out.allocs += int64(max(0, float64(idleS.allocs-idle0.allocs)*f))
	out.swtch += int64(max(0, float64(idleS.swtch-idle0.swtch)*f))
	return out
}

// processTotals is this process's CPU time, context switches and heap
// objects allocated so far.
type processTotals struct {
	cpu      time.Duration
	switches int64
	allocs   int64
}

// readProcess reads the process's totals at the start of a reading
// (start) or at its end. The allocation count comes from
// runtime.ReadMemStats, which stops the world and flushes every P's
// allocation cache first, so it is exact and counts tiny objects, as
// -benchmem does. (runtime/metrics' count moves a span's free slots at a
// time, as a P caches the span: a block of a few hundred objects could
// read 0.) That pause is kept out of the window between two readings:
// at a reading's start the CPU time is read before it, at its end after.
func readProcess(start bool) processTotals {
	var t processTotals
	if start {
		t.cpu, t.switches, _ = processUsage()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.allocs = int64(ms.Mallocs)
	if !start {
		t.cpu, t.switches, _ = processUsage()
	}
	return t
}

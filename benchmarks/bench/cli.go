package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Main is the command line of relockbench and of the peers command: it
// parses args, measures kinds, and writes the report to stdout (progress
// and notes to stderr). It returns the exit status: 0, 1 on a usage or
// setup error, 3 when some kind violated mutual exclusion.
//
// Without -scenarios, a run on the embedded miniredis is a short tour
// (QuickScenarios, 16 contenders, QuickDuration per measurement, unless
// -contenders or -duration say otherwise); a run on a real server
// measures every scenario.
func Main(name string, args []string, kinds []Kind, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		url         = fs.String("redis", "", "measure against the Redis server at this URL (redis://host:port); default: an embedded miniredis")
		redlockURLs = fs.String("redlock", "", "comma-separated URLs (or host:port) of 3 or more independent servers: adds multi-master kinds (Redlock on 3 and 5 of them) to the uncontended and hand-off scenarios")
		clusterURLs = fs.String("cluster", "", "comma-separated URLs (or host:port) of nodes of a Redis Cluster: adds relock's kinds on a go-redis ClusterClient (kind@cluster) to the uncontended and hand-off scenarios")
		duration    = fs.Duration("duration", time.Second, "length of one measurement (default "+QuickDuration.String()+" on the embedded miniredis without -scenarios)")
		scenarios   = fs.String("scenarios", strings.Join(Scenarios, ","), "comma-separated scenarios to run, or all (default on the embedded miniredis: "+strings.Join(QuickScenarios, ",")+")")
		kindList    = fs.String("kinds", "", "comma-separated kinds to run, by name or name prefix (default: all)")
		contenders  = fs.String("contenders", "1,4,16,64", "comma-separated contender counts of the contention scenario (default 16 on the embedded miniredis without -scenarios)")
		hold        = fs.Duration("hold", time.Millisecond, "critical section of the contention and read-heavy scenarios")
		handoffHold = fs.Duration("handoff-hold", 5*time.Millisecond, "mean hold before release in the hand-off scenario (jittered ±50%)")
		locks       = fs.Int("locks", 0, "locks held by the watchdog scenario (default 10000, 500 on miniredis)")
		peerLocks   = fs.Int("peer-locks", 0, "locks held by the watchdog scenario for peers (default: as -locks)")
		cOwners     = fs.Int("contended-owners", 16, "owners of the handoff-contended scenario")
		cHold       = fs.Duration("contended-hold", time.Millisecond, "critical section of the handoff-contended scenario")
		readers     = fs.String("many-readers", "1,100,1000", "comma-separated reader counts of the many-readers scenario")
		waiters     = fs.String("many-waiters", "", "comma-separated waiter counts of the many-waiters scenario (default 1,1000; 1,100 on miniredis)")
		lockNames   = fs.Int("lock-names", 100000, "names the many-locks scenario draws from")
		lockWorkers = fs.Int("lock-workers", 64, "goroutines of the many-locks scenario")
		memLocks    = fs.Int("memory-locks", 1000, "held locks measured by the redis-memory scenario")
		memWaiters  = fs.Int("memory-waiters", 1000, "queued waiters measured by the redis-memory scenario")
		wdTimeout   = fs.Duration("watchdog-timeout", 3*time.Second, "lease kept by automatic renewal in the watchdog scenario")
		stallAfter  = fs.Duration("stall-after", 500*time.Millisecond, "longest time without an acquisition, while owners wait, not reported as a stall (a loaded machine may need more)")
		base        = fs.String("base", KindMutex, "relock kind that peers are compared with")
		full        = fs.Bool("full", false, "after the summary, every measurement: a table of every scenario and kind, and the ratios relock/peer")
		targets     = fs.Bool("targets", false, "after the report, the project's performance targets, each met or MISSED with its figure")
		jsonOut     = fs.Bool("json", false, "write the full results as JSON to stdout instead of the report")
		jsonFile    = fs.String("json-file", "", "also write the full results as JSON to this file")
		fromJSON    = fs.String("from-json", "", "measure nothing: report the results saved in this JSON file (-json, -json-file)")
		svgFile     = fs.String("svg", "", "also write a bar chart to this SVG file")
		cycles      = fs.Int("cycles", 0, "measure nothing: run this many uncontended cycles of each kind (-kinds, which may also name the floors "+strings.Join(cycleFloors, " ")+") on one handle, on the -redis server, for a profiler watching it (benchmarks/instructions.sh); takes no other flag")
		cyclesRead  = fs.Bool("cycles-read", false, "with -cycles: cycle the read side (RLock+RUnlock) of kinds that have one")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags]\n\nKinds:", name)
		for _, k := range kinds {
			fmt.Fprintf(stderr, " %s", k.Name)
		}
		fmt.Fprintf(stderr, "\nScenarios: %s\n\nFlags:\n", strings.Join(Scenarios, " "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, name+": "+format+"\n", a...)
		return 1
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["cycles"] || set["cycles-read"] {
		return cyclesMain(cyclesArgs{set: set, url: *url, kinds: *kindList, n: *cycles, read: *cyclesRead}, kinds, stdout, fail)
	}
	out := output{json: *jsonOut, svgFile: *svgFile, jsonFile: *jsonFile, text: TextOptions{Full: *full, Targets: *targets}}

	if *fromJSON != "" {
		rep, err := readReport(*fromJSON)
		if err != nil {
			return fail("%v", err)
		}
		Evaluate(rep.Results)
		return out.write(rep, stdout, fail)
	}

	var masters []*Server
	if *redlockURLs != "" {
		var err error
		if masters, err = dialMasters(*redlockURLs); err != nil {
			return fail("%v", err)
		}
		kinds = append(kinds[:len(kinds):len(kinds)], multiMasterKinds(masters)...)
	}
	var cluster *Cluster
	if *clusterURLs != "" {
		var err error
		if cluster, err = dialCluster(*clusterURLs); err != nil {
			return fail("%v", err)
		}
		kinds = append(kinds[:len(kinds):len(kinds)], clusterKinds(kinds, cluster)...)
	}
	plan := Plan{Kinds: selectKinds(kinds, *kindList)}
	if len(plan.Kinds) == 0 {
		return fail("no kind matches -kinds %q", *kindList)
	}
	// The embedded miniredis is a short tour unless asked otherwise: its
	// figures are not Redis figures, and the tour shows what the summary
	// shows.
	quick := *url == "" && !set["scenarios"]
	if quick {
		*scenarios = strings.Join(QuickScenarios, ",")
		if !set["contenders"] {
			*contenders = strconv.Itoa(busyContenders)
		}
		if !set["duration"] {
			*duration = QuickDuration
		}
	}
	if strings.TrimSpace(*scenarios) == "all" {
		*scenarios = strings.Join(Scenarios, ",")
	}
	for _, s := range splitList(*scenarios) {
		if !slices.Contains(Scenarios, s) {
			return fail("unknown scenario %q (have %s, or all)", s, strings.Join(Scenarios, ", "))
		}
		plan.Scenarios = append(plan.Scenarios, s)
	}
	var err error
	if plan.Contenders, err = counts("-contenders", *contenders); err != nil {
		return fail("%v", err)
	}
	if plan.Readers, err = counts("-many-readers", *readers); err != nil {
		return fail("%v", err)
	}

	var srv *Server
	if *url == "" {
		srv, err = StartMini()
	} else {
		srv, err = Dial(*url)
	}
	if err != nil {
		return fail("%v", err)
	}
	defer srv.Close()
	if !srv.Real() {
		fmt.Fprintln(stderr, wrap(MiniredisWarning, 0, summaryWidth))
	}
	if *waiters == "" {
		*waiters = "1,1000"
		if !srv.Real() {
			*waiters = "1,100" // miniredis hands over too slowly to cycle 1,000 waiters quickly
		}
	}
	if plan.Waiters, err = counts("-many-waiters", *waiters); err != nil {
		return fail("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rtt, err := srv.RTT(ctx, 500)
	if err != nil {
		return fail("%v", err)
	}
	cfg := Config{
		Server: srv, Duration: *duration, Hold: *hold, HandoffHold: *handoffHold,
		WatchdogLocks: *locks, PeerWatchdogLocks: *peerLocks, WatchdogTimeout: *wdTimeout, RTT: rtt,
		ContendedOwners: *cOwners, ContendedHold: *cHold,
		LockNames: *lockNames, LockWorkers: *lockWorkers,
		MemoryLocks: *memLocks, MemoryWaiters: *memWaiters, StallAfter: *stallAfter,
	}.withDefaults()
	if !srv.Real() && *locks == 0 && slices.Contains(plan.Scenarios, ScenarioWatchdog) {
		fmt.Fprintf(stderr, "watchdog scenario: %s locks on miniredis (%s on a real server)\n",
			group(int64(cfg.WatchdogLocks)), group(TargetWatchdogLocks))
	}

	rep := &Report{Meta: Meta{
		Command:   strings.Join(append([]string{name}, args...), " "),
		Server:    srv.Describe(),
		RealRedis: srv.Real(),
		RTT:       rtt,
		Go:        runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:      runtime.GOMAXPROCS(0),
		Start:     time.Now(),
		Duration:  cfg.Duration, Hold: cfg.Hold, HandoffHold: cfg.HandoffHold,
		WatchdogLocks: cfg.WatchdogLocks, PeerWatchdogLocks: cfg.PeerWatchdogLocks, WatchdogTimeout: cfg.WatchdogTimeout,
		Contenders: plan.Contenders, ContendedOwners: cfg.ContendedOwners, ContendedHold: cfg.ContendedHold,
		Readers: plan.Readers, Waiters: plan.Waiters, LockNames: cfg.LockNames, LockWorkers: cfg.LockWorkers,
		MemoryLocks: cfg.MemoryLocks, MemoryWaiters: cfg.MemoryWaiters, RecordRate: cfg.RecordRate,
	}}
	if len(masters) > 0 {
		rep.Meta.RedlockMasters = describeMasters(masters)
	}
	if cluster != nil {
		rep.Meta.Cluster = cluster.Describe()
	}
	for _, k := range plan.Kinds {
		rep.Meta.Kinds = append(rep.Meta.Kinds, KindInfo{Name: k.Name, Peer: k.Peer, Note: k.Note})
		if k.Name == *base {
			rep.Base = *base
		}
	}
	rep.Results = Run(ctx, cfg, plan, stderr)
	rep.Meta.Elapsed = time.Since(rep.Meta.Start)
	Evaluate(rep.Results)

	if code := out.write(rep, stdout, fail); code != 0 {
		return code
	}
	for _, r := range rep.Results {
		if r.Violations > 0 {
			fmt.Fprintf(stderr, "%s: %s violated mutual exclusion %d times in %s\n", name, r.Kind, r.Violations, r.Label())
			return 3
		}
	}
	return 0
}

// output is what a run writes, and where.
type output struct {
	json              bool // JSON on stdout instead of the report
	svgFile, jsonFile string
	text              TextOptions
}

// write writes rep to stdout (the report, or JSON), and to the SVG and
// JSON files asked for; it returns the exit status.
func (o output) write(rep *Report, stdout io.Writer, fail func(string, ...any) int) int {
	var err error
	if o.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout, o.text)
	}
	if err != nil {
		return fail("%v", err)
	}
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{{o.svgFile, rep.WriteSVG}, {o.jsonFile, rep.WriteJSON}} {
		if out.file == "" {
			continue
		}
		f, err := os.Create(out.file)
		if err != nil {
			return fail("%v", err)
		}
		err = out.write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail("%v", err)
		}
	}
	return 0
}

// readReport reads a report saved as JSON.
func readReport(file string) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return rep, nil
}

// selectKinds returns the kinds whose name starts with one of the
// comma-separated prefixes in list, or all of them for an empty list.
func selectKinds(kinds []Kind, list string) []Kind {
	return selectNamed(kinds, list, func(k Kind) string { return k.Name })
}

// selectNamed returns the items whose name starts with one of the
// comma-separated prefixes in list, or all of them for an empty list.
func selectNamed[T any](items []T, list string, name func(T) string) []T {
	prefixes := splitList(list)
	if len(prefixes) == 0 {
		return items
	}
	var out []T
	for _, it := range items {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name(it), p) }) {
			out = append(out, it)
		}
	}
	return out
}

// counts parses a comma-separated list of positive counts.
func counts(flagName, list string) ([]int, error) {
	var out []int
	for _, s := range splitList(list) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad %s value %q", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

package bench

import "time"

// Scenario names, as used in results and in the -scenarios flag.
const (
	ScenarioUncontended = "uncontended"
	ScenarioHandoff     = "handoff"
	// ScenarioHandoffContended is the hand-off under sustained contention:
	// many owners in a loop, the sample being each release call to the
	// next holder running.
	ScenarioHandoffContended = "handoff-contended"
	ScenarioContention       = "contention"
	ScenarioReadHeavy        = "read-heavy"
	ScenarioManyReaders      = "many-readers"
	ScenarioManyWaiters      = "many-waiters"
	ScenarioManyLocks        = "many-locks"
	ScenarioWatchdog         = "watchdog"
	ScenarioMemory           = "redis-memory"
	// ScenarioServerCost is what one lock cycle costs the Redis server
	// (its CPU, the time inside scripts, the commands it runs) and this
	// process, beside the same cycle done with plain commands.
	ScenarioServerCost = "server-cost"
)

// Result is one measurement: one Kind in one scenario (and, for
// contention, one number of contenders). Latency means what the scenario
// measures: the Lock+Unlock cycle (uncontended, many-locks),
// release-to-next-holder (handoff, handoff-contended, many-waiters), the
// wait for the lock (contention, read-heavy: reads), or a reader's
// RLock+RUnlock (many-readers).
type Result struct {
	Kind       string `json:"kind"`
	Peer       bool   `json:"peer"`
	Scenario   string `json:"scenario"`
	Contenders int    `json:"contenders,omitempty"`
	// Count is the size of a many-readers or many-waiters measurement:
	// the readers holding, or the waiters queued.
	Count int `json:"count,omitempty"`
	// Masters is the number of independent masters of a multi-master
	// kind (see Kind.Masters), 0 for one server.
	Masters int `json:"masters,omitempty"`
	// Cluster is the number of masters of the Redis Cluster that a
	// cluster kind (see Kind.Cluster) ran on, 0 for one server.
	Cluster int `json:"cluster_masters,omitempty"`
	// Read says that the measurement is of the read side (RLock and
	// RUnlock) of a read/write lock: the server-cost scenario measures
	// both sides.
	Read      bool    `json:"read,omitempty"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Latency   Dist    `json:"latency"`
	// CmdsPerOp and TripsPerOp are counted by the client-side hook.
	CmdsPerOp  float64 `json:"commands_per_op"`
	TripsPerOp float64 `json:"round_trips_per_op"`
	// SubsPerOp is the SUBSCRIBE/UNSUBSCRIBE commands per op that a real
	// server ran (client hooks do not see them); nil when unknown.
	SubsPerOp  *float64 `json:"subscribe_commands_per_op,omitempty"`
	Errors     int64    `json:"errors"`
	Violations int64    `json:"violations"`
	Stalled    bool     `json:"stalled"`
	// Skipped says why the scenario does not apply to the kind.
	Skipped string   `json:"skipped,omitempty"`
	Err     string   `json:"error,omitempty"`
	Notes   []string `json:"notes,omitempty"`

	Uncontended *UncontendedStats `json:"uncontended,omitempty"`
	Handoff     *HandoffStats     `json:"handoff,omitempty"`
	Contention  *ContentionStats  `json:"contention,omitempty"`
	ReadHeavy   *ReadHeavyStats   `json:"read_heavy,omitempty"`
	ManyReaders *ManyReadersStats `json:"many_readers,omitempty"`
	ManyWaiters *ManyWaitersStats `json:"many_waiters,omitempty"`
	ManyLocks   *ManyLocksStats   `json:"many_locks,omitempty"`
	Watchdog    *WatchdogStats    `json:"watchdog,omitempty"`
	Memory      *MemoryStats      `json:"redis_memory,omitempty"`
	ServerCost  *ServerCostStats  `json:"server_cost,omitempty"`

	Targets []Check `json:"targets,omitempty"`
}

// Label names the measurement, e.g. "contention c=16".
func (r *Result) Label() string {
	if r.Read {
		return r.Scenario + " read"
	}
	return label(r.Scenario, r.Contenders, r.Count)
}

func label(scenario string, contenders, count int) string {
	switch scenario {
	case ScenarioContention:
		return scenario + " c=" + itoa(contenders)
	case ScenarioManyReaders:
		return scenario + " r=" + itoa(count)
	case ScenarioManyWaiters:
		return scenario + " w=" + itoa(count)
	}
	return scenario
}

// UncontendedStats are the uncontended scenario's figures beside the raw
// floor (SET NX PX + DEL) measured in the same run, interleaved.
type UncontendedStats struct {
	Floor          Dist    `json:"floor"`
	FloorCmdsPerOp float64 `json:"floor_commands_per_op"`
	// SweepsPerOp is the DELs of request records the Client sent in the
	// background per cycle (not in Result.CmdsPerOp): one per 100 ms at
	// most, each for the records of many cycles.
	SweepsPerOp float64 `json:"sweeps_per_op,omitempty"`
	// RatioP50 and RatioMean are the kind's cycle time over the floor's.
	RatioP50  float64 `json:"ratio_p50"`
	RatioMean float64 `json:"ratio_mean"`
	// SameClient says the floor ran on the kind's own go-redis client.
	SameClient bool `json:"same_client"`
	// ScriptFloor is SET NX PX + the smallest safe release, a one-line
	// compare-and-delete script (Redis 7.0 has no native one), measured
	// interleaved too; ScriptRatioP50 is the kind's cycle over it.
	ScriptFloor    Dist    `json:"script_floor"`
	ScriptRatioP50 float64 `json:"script_ratio_p50"`
	// ScriptRateRatio is the kind's cycles per second in a tight loop
	// over the script floor's (the inverse ratio of the mean cycle
	// times): higher is better.
	ScriptRateRatio float64 `json:"script_rate_ratio"`
}

// HandoffStats are the hand-off scenario's figures.
type HandoffStats struct {
	// Release is how long the holder's Unlock call took.
	Release Dist `json:"release"`
	// RTT is the server's PING round trip in a hot loop, measured in the
	// same run, and P50RTTs the hand-off median in those units.
	RTT     time.Duration `json:"rtt_ns"`
	P50RTTs float64       `json:"p50_rtts"`
	// IdleRTT is the median PING sent after the same idle holds as the
	// hand-offs (a machine woken from idle answers slower than a hot
	// loop), and P50IdleRTTs the hand-off median in those units.
	IdleRTT     time.Duration `json:"idle_rtt_ns"`
	P50IdleRTTs float64       `json:"p50_idle_rtts"`
	// Floor is the pushed hand-off of plain clients under the same idle
	// holds (PUBLISH, receive, SET NX), and RatioP50 the lock's median
	// over the floor's.
	Floor    Dist    `json:"floor"`
	RatioP50 float64 `json:"ratio_p50"`
	// ScriptFloor is the same with the holder's release an
	// owner-checked one: a compare-and-delete script that publishes
	// (GET, DEL, PUBLISH in one call), the least a safe lock's release
	// costs; ScriptRatioP50 the lock's median over its median.
	ScriptFloor    Dist    `json:"script_floor"`
	ScriptRatioP50 float64 `json:"script_ratio_p50"`
	// Timeouts counts waiters that did not get the lock within the wait
	// timeout after the release (a lost wake-up).
	Timeouts int64         `json:"timeouts"`
	HoldMin  time.Duration `json:"hold_min_ns"`
	HoldMax  time.Duration `json:"hold_max_ns"`
}

// ContentionStats are the contention scenario's figures.
type ContentionStats struct {
	Hold time.Duration `json:"hold_ns"`
	// MeanHold is the time actually spent inside (time.Sleep overshoots).
	MeanHold time.Duration `json:"mean_hold_ns"`
	Jain     float64       `json:"jain"`
	// Counts are the acquisitions of each contender.
	Counts []int64 `json:"counts"`
	// MaxWait includes waits still unfinished at the end (a starved
	// contender), unlike Latency.Max.
	MaxWait time.Duration `json:"max_wait_ns"`
	// LongestGap is the longest time without any acquisition while
	// contenders were waiting.
	LongestGap time.Duration `json:"longest_gap_ns"`
	Conns      int           `json:"conns"`
	// Wait is the wait for the lock (Latency too, except where the
	// scenario's Latency is the hand-off).
	Wait Dist `json:"wait"`
	// Handoff is, for each release call, the time until an owner other
	// than the releasing one had the lock (its Lock returned), however
	// often the releasing owner took it again meanwhile. NextHolder is the
	// time from each release call to the next holder, whoever it is, and
	// SelfHandoffs the share of those where the releasing owner itself
	// took the lock again. NotHandedOver counts release calls still not
	// followed by another owner at the end (not in Handoff).
	Handoff       Dist    `json:"handoff"`
	NextHolder    Dist    `json:"next_holder"`
	SelfHandoffs  float64 `json:"self_handoffs"`
	NotHandedOver int     `json:"not_handed_over"`
	// Release is how long each Unlock call took.
	Release Dist `json:"release"`
	// Server is the script time the server spent in the measurement, when
	// known (a real server).
	Server *ServerTime `json:"server,omitempty"`
	// Cost is what each acquisition of the window cost the server and
	// this process, when measured (the server-cost scenario).
	Cost *Cost `json:"cost,omitempty"`
}

// ServerTime is what a real server's INFO commandstats says about the
// scripts (EVAL, EVALSHA and their _RO forms) run in a measurement window:
// their calls and the time spent in them, which includes the commands
// they call. Only the benchmark uses the server while it measures, so
// every call in the window is one of the measured kind's.
type ServerTime struct {
	Calls int64 `json:"calls"`
	Usec  int64 `json:"usec"`
	// UsPerCall is Usec/Calls; UsPerOp is Usec per operation of the
	// scenario (an acquisition, a cycle).
	UsPerCall  float64 `json:"us_per_call"`
	UsPerOp    float64 `json:"us_per_op"`
	CallsPerOp float64 `json:"calls_per_op"`
}

// ReadHeavyStats are the read-heavy scenario's figures.
type ReadHeavyStats struct {
	Readers      int     `json:"readers"`
	Writers      int     `json:"writers"`
	Shared       bool    `json:"shared"`
	ReadsPerSec  float64 `json:"reads_per_sec"`
	WritesPerSec float64 `json:"writes_per_sec"`
	ReadWait     Dist    `json:"read_wait"`
	WriteWait    Dist    `json:"write_wait"`
	// MaxReaders is the most readers seen inside at once; MeanReaders
	// the mean number inside as seen by each reader entering.
	MaxReaders  int64         `json:"max_readers"`
	MeanReaders float64       `json:"mean_readers"`
	Hold        time.Duration `json:"hold_ns"`
}

// ManyReadersStats are the many-readers scenario's figures: Readers
// handles hold the read lock while a probe (on a Conn of its own) takes
// and gives back a read hold, and tries the write lock (refused).
type ManyReadersStats struct {
	Readers int `json:"readers"`
	// Read is the server's script time of the probe's RLock and RUnlock
	// calls, Write that of its refused write attempts (TryLock); nil on
	// miniredis. Their Calls are what the server counted in each window;
	// Extra counts calls in the windows that the probe did not send.
	Read  *ServerTime `json:"read_server,omitempty"`
	Write *ServerTime `json:"write_server,omitempty"`
	Extra int64       `json:"extra_calls"`
	// ReadCycle is the client's RLock+RUnlock time, WriteAttempt the
	// client's time of a refused write attempt.
	ReadCycle    Dist `json:"read_cycle"`
	WriteAttempt Dist `json:"write_attempt"`
	// BytesPerReader is the Redis memory (MEMORY USAGE of the lock's keys)
	// per reader holding; 0 when unknown.
	BytesPerReader float64 `json:"bytes_per_reader"`
	SetupSecs      float64 `json:"setup_seconds"`
}

// ManyWaitersStats are the many-waiters scenario's figures: Waiters+1
// owners lock one name in a loop with no critical section, so that one
// holds and Waiters wait in the lock's queue; every release hands the
// lock on. The rest (waits, fairness, the server's script time per call
// and per acquisition) is in the result's ContentionStats.
type ManyWaitersStats struct {
	Waiters int `json:"waiters"`
	// QueueLen is the length of the lock's queue sampled in the middle of
	// the window; -1 when unknown.
	QueueLen int64 `json:"queue_len"`
}

// ManyLocksStats are the many-locks scenario's figures: Workers goroutines
// of one process lock and unlock names drawn at random out of Names (a new
// handle per cycle, as an application locking "order:<id>" would), beside
// the raw floor SET NX PX + DEL on a go-redis client, interleaved.
type ManyLocksStats struct {
	Workers int `json:"workers"`
	Names   int `json:"names"`
	// FloorPerSec is the floor's cycles per second and Ratio the kind's
	// over it (higher is better).
	FloorPerSec float64 `json:"floor_cycles_per_sec"`
	Floor       Dist    `json:"floor"`
	Ratio       float64 `json:"ratio"`
	// Collisions counts floor cycles whose SET NX found the name taken by
	// another worker (skipped).
	Collisions int64 `json:"collisions"`
	SameClient bool  `json:"same_client"`
	// Where the time goes (real server only): CPU time per cycle of this
	// process (the client: the library, go-redis, the workers) and of the
	// server, for the kind's cycles and for the floor's.
	ClientCPU      time.Duration `json:"client_cpu_per_cycle_ns"`
	ServerCPU      time.Duration `json:"server_cpu_per_cycle_ns"`
	FloorClientCPU time.Duration `json:"floor_client_cpu_per_cycle_ns"`
	FloorServerCPU time.Duration `json:"floor_server_cpu_per_cycle_ns"`
}

// MemoryStats are the redis-memory scenario's figures, from MEMORY USAGE
// of every key that holds a name of the measurement (summed), and from
// the growth of the server's allocated memory less client buffers
// (Alloc*: MEMORY STATS; it also counts the keyspace's dictionaries,
// expiry entries and pub/sub subscriptions).
type MemoryStats struct {
	Locks   int `json:"locks"`
	Waiters int `json:"waiters"`
	// Held: keys and bytes per held lock (one owner per lock), by kind of
	// key ("lock", "record", "owners", "queue", ...).
	KeysPerLock  float64            `json:"keys_per_lock"`
	BytesPerLock float64            `json:"bytes_per_lock"`
	ByClass      map[string]float64 `json:"bytes_per_lock_by_class"`
	AllocPerLock float64            `json:"alloc_per_lock"`
	// Waiters (kinds whose waiters queue in Redis): bytes per queued
	// waiter, and the queue length seen.
	BytesPerWaiter float64 `json:"bytes_per_waiter"`
	AllocPerWaiter float64 `json:"alloc_per_waiter"`
	Queued         int64   `json:"queued"`
	// After each lock was released once: the keys left (request records),
	// their bytes and remaining TTL, and what records hold at steady state
	// at RecordRate cycles/s of distinct owners: bytes x rate x TTL.
	LeftPerCycle  float64       `json:"keys_left_per_cycle"`
	BytesPerLeft  float64       `json:"bytes_per_key_left"`
	AllocPerLeft  float64       `json:"alloc_per_key_left"`
	LeftTTL       time.Duration `json:"left_ttl_ns"`
	RecordRate    float64       `json:"record_rate"`
	SteadyRecords float64       `json:"steady_state_record_bytes"`
	// Records is what the keys left by lock cycles of new handles
	// (relock's request records) were measured to be: how many are left
	// and for how long, and what they hold while owners cycle at a
	// steady rate; nil when not measured.
	Records *RecordStats `json:"records,omitempty"`
}

// WatchdogStats are the watchdog-at-scale scenario's figures.
type WatchdogStats struct {
	Locks  int           `json:"locks"`
	Period time.Duration `json:"period_ns"`
	Window time.Duration `json:"window_ns"`
	// Per renewal period (counted over Window, scaled to Period), while
	// all locks are held and nothing else runs.
	CmdsPerPeriod  float64 `json:"commands_per_period"`
	TripsPerPeriod float64 `json:"round_trips_per_period"`
	CmdsPerSec     float64 `json:"commands_per_sec"`
	// Rounds are the renewal rounds seen in the window when renewals come
	// in bursts (all locks at once), with their mean interval and size;
	// 0 when they are spread out (a timer per lock).
	Rounds        int           `json:"rounds"`
	RoundInterval time.Duration `json:"round_interval_ns"`
	CmdsPerRound  float64       `json:"commands_per_round"`
	TripsPerRound float64       `json:"round_trips_per_round"`
	// Goroutines added by holding a tenth of the locks, and all of them.
	GoroutinesTenth int `json:"goroutines_added_tenth"`
	GoroutinesAll   int `json:"goroutines_added_all"`
	// BytesPerLock is the client's heap and stack growth per held lock
	// (handles included). On miniredis the server's memory is included.
	BytesPerLock float64 `json:"bytes_per_lock"`
	AcquireSecs  float64 `json:"acquire_seconds"`
	// Lost counts holds whose Unlock failed after the window.
	Lost int64 `json:"lost"`
	// Server is the script time on a real server in the window, per held
	// lock and renewal period (UsPerOp) and per script call.
	Server *ServerTime `json:"server,omitempty"`
}

// Check is one target of the issue, evaluated on a result.
type Check struct {
	Target string `json:"target"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
}

package bench

import "time"

// Scenario names, as used in results and in the -scenarios flag.
const (
	ScenarioUncontended = "uncontended"
	ScenarioHandoff     = "handoff"
	ScenarioContention  = "contention"
	ScenarioReadHeavy   = "read-heavy"
	ScenarioWatchdog    = "watchdog"
)

// Result is one measurement: one Kind in one scenario (and, for
// contention, one number of contenders). Latency means what the scenario
// measures: the Lock+Unlock cycle (uncontended), release-to-waiter-return
// (handoff), or the wait for the lock (contention, read-heavy: reads).
type Result struct {
	Kind       string  `json:"kind"`
	Peer       bool    `json:"peer"`
	Scenario   string  `json:"scenario"`
	Contenders int     `json:"contenders,omitempty"`
	Seconds    float64 `json:"seconds"`
	Ops        int64   `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	Latency    Dist    `json:"latency"`
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
	Watchdog    *WatchdogStats    `json:"watchdog,omitempty"`

	Targets []Check `json:"targets,omitempty"`
}

// Label names the measurement, e.g. "contention c=16".
func (r *Result) Label() string {
	if r.Scenario == ScenarioContention {
		return r.Scenario + " c=" + itoa(r.Contenders)
	}
	return r.Scenario
}

// UncontendedStats are the uncontended scenario's figures beside the raw
// floor (SET NX PX + DEL) measured in the same run, interleaved.
type UncontendedStats struct {
	Floor          Dist    `json:"floor"`
	FloorCmdsPerOp float64 `json:"floor_commands_per_op"`
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
}

// Check is one target of the issue, evaluated on a result.
type Check struct {
	Target string `json:"target"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
}

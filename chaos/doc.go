// Package chaos is relock's multi-process chaos test. It has no
// API: everything is in its tests, which need a real redis-server.
//
//	RELOCK_REQUIRE_REDIS=1 go test -race -count=1 ./chaos/                     # CI: about 80 s
//	RELOCK_CHAOS_DURATION=10m go test -race -count=1 -timeout 40m -v ./chaos/   # a long run, with its tables
//	go test -race -count=1 ./chaos/ -chaos.duration=10m -timeout 40m -v         # the same (flags after the package)
//
// -chaos.duration (or $RELOCK_CHAOS_DURATION) is the workload time of
// TestChaos over all its runs: every lock type (mutex, reentrant, fair,
// rwlock with readers and writers, semaphore) with the watchdog (1 s
// timeout) and with a fixed lease (500 ms), ten runs in all, each a tenth
// of it: 1 min by default (6 s a run; about 80 s of wall time in all, with
// the runs' starts and stops and the negative control), a fifth of it
// with -short. A run of the default length or longer must inject every
// fault kind at least once (it does several times), or TestChaos fails.
// $RELOCK_CHAOS_FAULTS=kind,kind restricts the faults to those kinds, to
// reproduce a finding; $RELOCK_CHAOS_DEBUG=dir makes every worker write a
// log of its unlock attempts there. Without redis-server on PATH the tests
// skip; with RELOCK_REQUIRE_REDIS=1 they fail. miniredis cannot be
// crashed, stalled or paused, so it is not used.
//
// # A run
//
// Each run starts a redis-server of its own (appendonly yes, appendfsync
// always, its files in /dev/shm when there is one), so that it can be
// crashed and restarted on the same port with its data or without it. Five
// worker processes, the test binary re-executed (see TestMain; with -race
// they are race-checked too, and a data race in one fails the run), each
// reach it through a fault-injecting proxy of their own
// (redistest.FaultProxy, in the test process) with go-redis timeouts of
// 500 ms. Each worker runs two owners; each owner has a handle per lock
// name (three names, the first with relock.WithFencing) and loops: pick a
// name, acquire it (a Lock call gives up after 5 s), enter, stay 1-20 ms
// (one time in 20, 100-250 ms, so that the faults aimed at a holder land
// inside), leave, release. A quarter of the stays take a nested hold
// (reentrant and fair: Lock again; rwlock: a read inside a read or a
// write). A stay ends early when the hold's Lost channel fires, as
// well-written code stops when told. The rwlock's owners read 60% of the
// time; the semaphore has 3 permits and its owners take 1 or 2.
//
// Two fault lanes run beside the workers, one fault at a time each, every
// kind in turn (the turn carries over between runs, so a short run of the
// package injects every kind several times: in CI about 9 of each):
//
//   - at a worker inside a critical section (the one that means to stay
//     longest): kill (SIGKILL, and a new worker takes its place), stop
//     (SIGSTOP for 1.5 leases, then SIGCONT), cut (its proxy a black hole
//     for 1.5 leases, then healed), latency (5-50 ms on every chunk either
//     way, for 2 leases), reset (for a lease, 20% of the chunks reset the
//     connection: a reply dropped after its command ran, or a command cut
//     in half);
//   - at the server: pause-write (CLIENT PAUSE WRITE, 0.1 s to a lease),
//     debug-sleep (DEBUG SLEEP past the workers' read timeout: replies
//     lost, commands resent and run twice), script-flush, kill-pubsub
//     (CLIENT KILL TYPE pubsub), delete-key (an operator's DEL of a held
//     lock's key), restart (a crash, its files wiped: a restart without
//     persistence), restart-aof (a crash and a restart from the append-only
//     file, fsync always).
//
// A sampler looks at every key of the run's locks every 100 ms (SCAN and
// PTTL through a connection of its own): a key without a TTL, fencing
// counters aside, is a failure, whenever it is seen; so is a run whose
// samples saw no key at all (the sampler would be looking in the wrong
// place).
//
// When the time is up the lanes finish their faults, the workers get
// SIGTERM (they finish their stay, release and close their Client) and
// SIGKILL if they do not exit within 5 s (each must exit with status 0).
// Within one lease (or heartbeat, 1 s) plus 1 s nothing of the locks may
// be left but the fencing counter and request records with a TTL; and the
// test process must have leaked no goroutine: redistest.CheckGoroutines
// counts relock's and go-redis's, checkOwnGoroutines this package's (the
// fleet's readers, the fault lanes, the sampler).
//
// # The oracle
//
// Nothing that the faults reach judges the workers. Each worker writes a
// line per event to its stdout, a pipe to the test process (see
// records_test.go): when each acquire call began and returned, when it
// entered and left, its fencing token, whether its Lost had fired when it
// left and when it saw it fire (a goroutine stamps that), the outcome of
// its nested acquire and of its release (and how many Unlock calls that
// took: a call whose reply was lost is made again), and the spans in
// which its own 5 ms ticker did not run (it was stopped or starved).
// Times are wall-clock nanoseconds: CLOCK_REALTIME is one clock for every process of a host, so
// the stamps of different workers compare, and a leave stamped before an
// Unlock precedes the enter stamped after the Lock that this Unlock let
// through. The test process adds what it did: when it stopped and killed
// whom, when Redis lost data (a restart without persistence: every lock;
// delete-key: one lock), when it restarted with its data.
//
// # Judging
//
// Two stays of one lock may not overlap (a reader's with another reader's
// may; the semaphore's may as long as their permits add up to at most 3).
// For each stay B that enters while a stay A that it may not overlap is
// inside, the judge (judge_test.go) decides, in this order:
//
//  1. after data loss: Redis lost the lock's data (restart without
//     persistence, delete-key) after one hold's acquire began and before
//     the other's returned, and the first hold did not survive it (its
//     Lost fired, or its unlock did not succeed: a hold whose unlock
//     succeeded was still in Redis, so it was granted after the loss, e.g.
//     to a waiter whose call began before). Either of A and B may be the
//     hold granted first: B's grant may precede A's and reach B late
//     (latency), after A entered. Expected: the guarantee holds while
//     Redis keeps the key.
//  2. stale holder: A's or B's worker was paused for at least half a
//     lease (SIGSTOP, or a stall it saw itself) after its acquire was
//     granted and before B entered. The documented hazard: only a
//     fencing token checked by the resource detects it (the judge counts
//     the stale overlaps whose stale holder had the lower token, and how
//     often its Lost had still not fired when it left, long past its
//     lease).
//  3. overstay: A's Lost had fired by the time B entered (give or take
//     50 ms for the goroutine that stamps it), but A was still inside:
//     blocked in its nested acquire through a cut network until go-redis
//     timed out. It was told; code that must not overstay checks Lost
//     after every call (and uses fencing).
//  4. violation, anything else: B entered while A's hold was live and
//     Redis kept the data; or A learned of its loss more than 50 ms after
//     B entered with no stall of its process after B entered to explain
//     it (a stall explains a late Lost only if it still ran then: had A's
//     process run, its Lost would have fired at its local deadline, before
//     the key expired and B could take it).
//
// Also failures: a fencing token not above an earlier hold's (in acquire
// order) that neither a restart without persistence (expected regressions,
// counted) nor a stale holder explains; and a hold that Redis no longer
// had (Lost fired "gone", or its release found the lock gone) before the
// lifetime its acquire gave its key could have run out (the lease, or the
// claim lease of a hand-over, half the heartbeat: 500 ms here, from when
// the acquire call began) unless Redis lost data meanwhile. That check is
// what "a restart with persistence loses nothing" means here; the judge
// also counts the stays inside across such a restart. An unlock that said
// "gone" after an earlier Unlock call of the same hold had lost its reply
// is no evidence of a loss: that call may have released the lock, and
// relock answers "gone" when the retry comes after the release's request
// record expired (see verdict.goneAfterRetry); such unlocks are counted,
// not failed.
//
// The judge must be able to fail: TestJudge feeds it synthetic records
// (an overlap, readers together, a writer among readers, N+1 permits, a
// stale holder, a pause too short or too early to explain anything, a
// stall before the other entered that explains no late Lost, an overstay,
// a hold that survived a restart or was granted after it, tokens going
// back), and TestOracleCatchesBrokenLock runs workers that enter without
// taking the lock and must be reported (thousands of violations in 2 s).
//
// Each run logs a line of figures; TestChaos logs a table of all runs and
// of the faults by kind (go test -v), to paste into docs/testing.md.
package chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

// The faults, in two lanes that run side by side, each injecting one fault
// at a time, kind after kind in turn (the turn carries over from one run to
// the next, so every kind comes up in a short run of the whole package).
var (
	// workerFaults hit one worker, preferably one inside a critical
	// section: its process or its own proxy.
	workerFaults = []string{"kill", "stop", "cut", "latency", "reset"}
	// serverFaults hit the Redis server under test, through an admin
	// connection of the test's own.
	serverFaults = []string{"pause-write", "debug-sleep", "script-flush", "kill-pubsub", "delete-key", "restart", "restart-aof"}

	workerTurn, serverTurn atomic.Int64
)

// injector injects the faults of one run and keeps what the judge needs
// to know of them.
type injector struct {
	f       *fleet
	srv     *redistest.Managed
	admin   *redis.Client
	kind    string   // the lock type, for key names
	names   []string // the locks
	lease   time.Duration
	timeout time.Duration // the workers' go-redis timeouts
	rnd     *rand.Rand

	mu     sync.Mutex
	counts map[string]int
	stops  map[string][]window // SIGSTOPs, per worker
	losses []dataLoss
	kept   []window // restarts with persistence
	aimed  []aim    // faults aimed at a holder
	log    []string // every fault, when, on what
	errs   []string
}

// aim is a fault aimed at a worker inside a critical section: whether it
// landed inside is found from the records afterwards.
type aim struct {
	kind   string
	worker string
	at     int64
}

// landed counts, by kind, the faults aimed at a holder that hit its worker
// while one of its holds was inside, and how many were aimed.
func (in *injector) landed(holds []*hold) (hit, aimed map[string]int) {
	hit, aimed = map[string]int{}, map[string]int{}
	for _, a := range in.aimed {
		aimed[a.kind]++
		for _, h := range holds {
			if h.worker == a.worker && h.enter <= a.at && a.at < h.leave {
				hit[a.kind]++
				break
			}
		}
	}
	return hit, aimed
}

func (in *injector) aim(kind string, w *worker) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.aimed = append(in.aimed, aim{kind: kind, worker: w.id, at: now()})
}

// onlyFaults restricts the faults to those named in
// $RELOCK_CHAOS_FAULTS (comma-separated), if set: to reproduce a finding.
func onlyFaults(kinds []string) []string {
	only := os.Getenv("RELOCK_CHAOS_FAULTS")
	if only == "" {
		return kinds
	}
	var out []string
	for _, k := range kinds {
		if slices.Contains(strings.Split(only, ","), k) {
			out = append(out, k)
		}
	}
	return out
}

// lane injects faults of kinds, in turn, with a random gap in [lo, hi)
// before each, until the deadline.
func (in *injector) lane(until time.Time, kinds []string, turn *atomic.Int64, lo, hi time.Duration) {
	kinds = onlyFaults(kinds)
	if len(kinds) == 0 {
		return
	}
	for {
		gap := lo + time.Duration(in.intN(int64(hi-lo)))
		if left := time.Until(until); gap >= left {
			time.Sleep(max(left, 0)) // no fault would start: the run ends
			return
		}
		time.Sleep(gap)
		k := kinds[int(turn.Add(1)-1)%len(kinds)]
		from := now()
		if target, ok := in.inject(k); ok {
			in.mu.Lock()
			in.counts[k]++
			in.log = append(in.log, fmt.Sprintf("%s-%s %s %s", stamp(from), stamp(now()), k, target))
			in.mu.Unlock()
		}
	}
}

func (in *injector) intN(n int64) int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rnd.Int64N(n)
}

func (in *injector) fail(format string, args ...any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.errs = append(in.errs, fmt.Sprintf(format, args...))
}

// stamp formats a wall-clock time as the findings do.
func stamp(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }

// inject injects one fault of kind k and reports whether it did, and on
// what.
func (in *injector) inject(k string) (target string, ok bool) {
	ctx := context.Background()
	past := in.lease * 3 / 2 // "past the lease"
	switch k {
	case "kill": // SIGKILL of a holder; a new worker takes its place
		w := in.holder()
		if w == nil {
			return "", false
		}
		target = w.id
		in.aim(k, w)
		in.f.kill(w)
		in.f.spawn()
	case "stop": // SIGSTOP of a holder past its lease, then SIGCONT
		w := in.holder()
		if w == nil {
			return "", false
		}
		target = w.id
		from := now()
		if err := in.f.signal(w, syscall.SIGSTOP); err != nil {
			return "", false
		}
		in.aim(k, w)
		time.Sleep(past)
		to := now()
		if err := in.f.signal(w, syscall.SIGCONT); err != nil {
			in.fail("SIGCONT %s: %v", w.id, err)
		}
		in.mu.Lock()
		in.stops[w.id] = append(in.stops[w.id], window{from, to})
		in.mu.Unlock()
	case "cut": // a holder's network: black hole past its lease, then heal
		w := in.holder()
		if w == nil {
			return "", false
		}
		target = w.id
		w.proxy.Blackhole(true)
		in.aim(k, w)
		time.Sleep(past)
		w.proxy.Blackhole(false)
	case "latency": // 5-50 ms on every packet of a worker, for two leases
		w := in.holder()
		if w == nil {
			return "", false
		}
		target = w.id
		w.proxy.Latency(5*time.Millisecond, 50*time.Millisecond)
		time.Sleep(2 * in.lease)
		w.proxy.Latency(0, 0)
	case "reset": // a worker's connections reset in the middle of commands, for a lease
		w := in.holder()
		if w == nil {
			return "", false
		}
		target = w.id
		w.proxy.Resets(0.2)
		time.Sleep(in.lease)
		w.proxy.Resets(0)
	case "pause-write": // CLIENT PAUSE WRITE for up to a lease
		d := 100*time.Millisecond + time.Duration(in.intN(int64(in.lease)))
		if err := in.admin.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "WRITE").Err(); err != nil {
			in.fail("CLIENT PAUSE: %v", err)
			return "", false
		}
		time.Sleep(d)
	case "debug-sleep": // the server stalls past the workers' read timeout: replies lost, commands resent
		d := in.timeout + 200*time.Millisecond
		if err := in.admin.Do(ctx, "DEBUG", "SLEEP", d.Seconds()).Err(); err != nil {
			in.fail("DEBUG SLEEP: %v", err)
			return "", false
		}
	case "script-flush":
		if err := in.admin.ScriptFlush(ctx).Err(); err != nil {
			in.fail("SCRIPT FLUSH: %v", err)
			return "", false
		}
	case "kill-pubsub":
		if err := in.admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			in.fail("CLIENT KILL TYPE pubsub: %v", err)
			return "", false
		}
	case "delete-key": // an operator deletes a held lock's key
		lock := in.f.heldLock(in.rnd2(), in.names)
		target = lock
		from := now()
		err := in.admin.Del(ctx, mainKey(in.kind, lock)).Err()
		to := now()
		if err != nil {
			in.fail("DEL: %v", err)
			return "", false
		}
		in.loss(dataLoss{lock: lock, window: window{from, to}})
	case "restart": // crash and restart without the data: everything is lost
		from := now()
		err := in.srv.Restart(true)
		to := now()
		in.loss(dataLoss{window: window{from, to}})
		if err != nil {
			in.fail("restart: %v", err)
		}
	case "restart-aof": // crash and restart from the append-only file (appendfsync always): nothing is lost
		from := now()
		err := in.srv.Restart(false)
		to := now()
		if err != nil {
			in.fail("restart from AOF: %v", err)
		}
		in.mu.Lock()
		in.kept = append(in.kept, window{from, to})
		in.mu.Unlock()
	default:
		panic("unknown fault " + k)
	}
	return target, true
}

func (in *injector) holder() *worker { return in.f.holder(in.rnd2()) }

// rnd2 returns a generator of its own for a call (in.rnd is shared by the
// lanes).
func (in *injector) rnd2() *rand.Rand {
	in.mu.Lock()
	defer in.mu.Unlock()
	return rand.New(rand.NewPCG(in.rnd.Uint64(), in.rnd.Uint64()))
}

func (in *injector) loss(l dataLoss) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.losses = append(in.losses, l)
}

// mainKey is the key an operator deletes to free a lock by hand.
func mainKey(kind, name string) string { return "relock:" + kind + ":{" + name + "}" }

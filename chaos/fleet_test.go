package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// fleet is the worker processes of one run, and what they reported.
type fleet struct {
	t    *testing.T
	base spec // every worker's spec, but for ID and Addr
	addr string

	mu       sync.Mutex
	next     int
	workers  map[string]*worker
	holds    map[string]*hold
	order    []*hold
	pauses   map[string][]window
	deaths   map[string]int64
	failures map[string]int // acquire failures by why
	unlocks  map[string]int // unlock outcomes
	losses   map[string]int // lost holds by why (L lines with lost=1, S lines)
	skipped  int            // acquired, Lost already fired: not entered
	bad      []string       // unparsable lines, unexpected exits
}

// worker is one worker process.
type worker struct {
	id     string
	cmd    *exec.Cmd
	proxy  *redistest.FaultProxy
	stderr *bytes.Buffer // guarded by fleet.mu through safeBuffer
	open   map[string]*hold
	exited chan struct{}
	ready  bool // said R
	killed bool // by the test: its exit is expected
	clean  bool // said B: it stopped on SIGTERM
}

func newFleet(t *testing.T, base spec, addr string) *fleet {
	return &fleet{t: t, base: base, addr: addr, workers: map[string]*worker{}, holds: map[string]*hold{},
		pauses: map[string][]window{}, deaths: map[string]int64{}, failures: map[string]int{},
		unlocks: map[string]int{}, losses: map[string]int{}}
}

// spawn starts a worker process (the test binary again, see TestMain),
// talking to Redis through a proxy of its own.
func (f *fleet) spawn() *worker {
	f.t.Helper()
	f.mu.Lock()
	f.next++
	id := fmt.Sprintf("w%d", f.next)
	f.mu.Unlock()
	p := redistest.NewFaultProxy(f.t, f.addr)
	sp := f.base
	sp.ID, sp.Addr = id, p.Addr
	js, err := json.Marshal(sp)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// With -race, a process sleeps 1 s at its exit (for late reports)
	// unless told not to: a second per worker stopped.
	cmd.Env = append(os.Environ(), workerEnv+"="+string(js),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	w := &worker{id: id, cmd: cmd, proxy: p, stderr: &bytes.Buffer{}, open: map[string]*hold{}, exited: make(chan struct{})}
	cmd.Stderr = &safeWriter{mu: &f.mu, w: w.stderr}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.workers[id] = w
	f.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.record(w, sc.Text())
		}
		err := cmd.Wait()
		f.mu.Lock()
		switch {
		case strings.Contains(w.stderr.String(), "WARNING: DATA RACE"):
			// The library under test raced in a worker: exit status 66,
			// or killed before it could exit with it.
			f.bad = append(f.bad, fmt.Sprintf("worker %s: data race; stderr:\n%s", id, w.stderr.String()))
		case !w.killed && (!w.clean || err != nil):
			f.bad = append(f.bad, fmt.Sprintf("worker %s exited unexpectedly: %v; stderr:\n%s", id, err, w.stderr.String()))
		}
		if _, ok := f.deaths[id]; !ok {
			f.deaths[id] = now()
		}
		f.mu.Unlock()
		close(w.exited)
	}()
	return w
}

// safeWriter serializes writes to a buffer shared with the fleet.
type safeWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *safeWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w.Len() > 64<<10 {
		return len(p), nil // keep the start: a panic or race report
	}
	return s.w.Write(p)
}

// record takes note of one line of worker w.
func (f *fleet) record(w *worker, s string) {
	l, err := parseLine(s)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.bad = append(f.bad, fmt.Sprintf("%s: %v", w.id, err))
		return
	}
	switch l.tag {
	case 'E':
		h, err := enterHold(l)
		if err != nil {
			f.bad = append(f.bad, err.Error())
			return
		}
		f.holds[h.id] = h
		f.order = append(f.order, h)
		w.open[h.id] = h
	case 'L':
		h := f.holds[l.fields[0]]
		if h == nil {
			f.bad = append(f.bad, "leave without enter: "+s)
			return
		}
		if err := leaveHold(h, l); err != nil {
			f.bad = append(f.bad, err.Error())
		}
		if h.lost {
			f.losses[h.why]++
		}
		delete(w.open, h.id)
	case 'U':
		if h := f.holds[l.fields[0]]; h != nil {
			h.unlock = l.fields[1]
			if n, err := ints(l.fields[2], l.fields[3]); err == nil {
				h.unlocked, h.tries = n[0], int(n[1])
			}
		}
		f.unlocks[l.fields[1]]++
	case 'S':
		f.skipped++
		f.losses[l.fields[2]]++
	case 'F':
		f.failures[l.fields[2]]++
	case 'P':
		if n, err := ints(l.fields[1], l.fields[2]); err == nil {
			f.pauses[w.id] = append(f.pauses[w.id], window{n[0], n[1]})
		}
	case 'R':
		w.ready = true
	case 'B':
		w.clean = true
	}
}

// live returns the workers that have not exited, in id order.
func (f *fleet) live() []*worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*worker
	for _, w := range f.workers {
		select {
		case <-w.exited:
		default:
			if !w.killed {
				out = append(out, w)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// holder returns the live worker that means to stay inside a critical
// section the longest from now, waiting up to a second for one that stays
// a while; else any live worker; nil if none is live.
func (f *fleet) holder(rnd *rand.Rand) *worker {
	deadline := time.Now().Add(time.Second)
	for {
		ws := f.live()
		if len(ws) == 0 {
			return nil
		}
		var best *worker
		var left int64
		f.mu.Lock()
		t := now()
		for _, w := range ws {
			for _, h := range w.open {
				if l := h.enter + h.plan - t; l > left {
					best, left = w, l
				}
			}
		}
		f.mu.Unlock()
		if time.Duration(left) >= 50*time.Millisecond {
			return best
		}
		if time.Now().After(deadline) {
			if best != nil {
				return best
			}
			return ws[rnd.IntN(len(ws))]
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// heldLock returns the name of a lock some worker is inside now, or one of
// names.
func (f *fleet) heldLock(rnd *rand.Rand, names []string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var held []string
	for _, w := range f.workers {
		for _, h := range w.open {
			held = append(held, h.lock)
		}
	}
	sort.Strings(held)
	if len(held) > 0 {
		return held[rnd.IntN(len(held))]
	}
	return names[rnd.IntN(len(names))]
}

// kill kills w (SIGKILL) and waits until it is gone; its open holds end now.
func (f *fleet) kill(w *worker) {
	f.mu.Lock()
	w.killed = true
	f.deaths[w.id] = now()
	f.mu.Unlock()
	_ = w.cmd.Process.Kill()
	<-w.exited
	w.proxy.Close()
}

// signal sends sig to w.
func (f *fleet) signal(w *worker, sig syscall.Signal) error {
	return w.cmd.Process.Signal(sig)
}

// stop stops every worker: SIGTERM, and SIGKILL for those still there
// after grace.
func (f *fleet) stop(grace time.Duration) {
	ws := f.live()
	for _, w := range ws {
		f.mu.Lock()
		ready := w.ready
		f.mu.Unlock()
		if !ready {
			// Just started (a replacement): SIGTERM would find no handler
			// yet. It holds nothing it has told of; kill it.
			f.kill(w)
			continue
		}
		_ = f.signal(w, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, w := range ws {
		select {
		case <-w.exited:
		case <-deadline:
			f.mu.Lock()
			f.bad = append(f.bad, fmt.Sprintf("worker %s did not stop within %v of SIGTERM", w.id, grace))
			f.mu.Unlock()
			f.kill(w)
		}
	}
	for _, w := range ws {
		<-w.exited
		w.proxy.Close()
	}
}

// evidence returns what the fleet knows of pauses and deaths, with the
// pauses the test caused added.
func (f *fleet) evidence(stops map[string][]window, losses []dataLoss, kept []window) evidence {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := evidence{pauses: map[string][]window{}, deaths: map[string]int64{}, losses: losses, kept: kept, end: now()}
	for id, ws := range f.pauses {
		ev.pauses[id] = append(ev.pauses[id], ws...)
	}
	for id, ws := range stops {
		ev.pauses[id] = append(ev.pauses[id], ws...)
	}
	for id, d := range f.deaths {
		ev.deaths[id] = d
	}
	return ev
}

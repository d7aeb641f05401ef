package main

// run's tests start relock run as a real process, this test binary
// re-executed as the command (asCommand), and give it children that are
// this test binary too (asChild: see child), which record what they see
// in files.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/semaphore"
)

// The first argument that makes this test binary the relock command, or a
// child for relock run.
const (
	asCommand = "relock-test-as-command"
	asChild   = "relock-test-as-child"
)

// child is a command for relock run to run, by its first argument:
//
//	record FILE D       append "start PID NS" to FILE, sleep D (with D "await":
//	                    until FILE.go has a line), append "end PID NS"
//	env                 print RELOCK_NAME and RELOCK_FENCE ("<unset>" if unset)
//	io CODE             copy stdin to stdout, write "to stderr" on stderr, exit CODE
//	signals FILE [ignore-term] [spawn]
//	                    append "ready PID" to FILE, then each signal (SIGINT,
//	                    SIGTERM, SIGHUP, SIGQUIT) received; on one, once FILE.go
//	                    has a line, append "exit" and exit 7, except on SIGTERM
//	                    with ignore-term; with spawn, first start a grandchild
//	                    "signals FILE.g ignore-term" (its "ready PID" first)
//	sleep FILE          append "ready PID" to FILE, sleep a minute; signals
//	                    have their default effect
//	await FILE          append "ready PID" to FILE, exit 0 once FILE.go has a line
func child(args []string) int {
	switch args[0] {
	case "record":
		note(args[1], "start", strconv.Itoa(os.Getpid()), strconv.FormatInt(time.Now().UnixNano(), 10))
		if args[2] == "await" {
			awaitGo(args[1])
		} else {
			d, _ := time.ParseDuration(args[2])
			time.Sleep(d)
		}
		note(args[1], "end", strconv.Itoa(os.Getpid()), strconv.FormatInt(time.Now().UnixNano(), 10))
	case "env":
		for _, k := range []string{"RELOCK_NAME", "RELOCK_FENCE"} {
			v, ok := os.LookupEnv(k)
			if !ok {
				v = "<unset>"
			}
			fmt.Printf("%s=%s\n", k, v)
		}
	case "io":
		code, _ := strconv.Atoi(args[1])
		_, _ = io.Copy(os.Stdout, os.Stdin)
		fmt.Fprintln(os.Stderr, "to stderr")
		return code
	case "signals":
		file, ignoreTerm, spawn := args[1], contains(args[2:], "ignore-term"), contains(args[2:], "spawn")
		sigs := make(chan os.Signal, 8)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		if spawn {
			g := exec.Command(os.Args[0], asChild, "signals", file+".g", "ignore-term")
			if err := g.Start(); err != nil {
				return 99
			}
			for !strings.Contains(read(file+".g"), "ready") {
				time.Sleep(5 * time.Millisecond)
			}
		}
		note(file, "ready", strconv.Itoa(os.Getpid()))
		for s := range sigs {
			note(file, signalName(s))
			if s == syscall.SIGTERM && ignoreTerm {
				continue
			}
			awaitGo(file)
			note(file, "exit")
			return 7
		}
	case "sleep":
		note(args[1], "ready", strconv.Itoa(os.Getpid()))
		time.Sleep(time.Minute)
	case "await":
		note(args[1], "ready", strconv.Itoa(os.Getpid()))
		awaitGo(args[1])
	default:
		return 98
	}
	return 0
}

// awaitGo returns once file.go has a line.
func awaitGo(file string) {
	for read(file+".go") == "" {
		time.Sleep(5 * time.Millisecond)
	}
}

func contains(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

// note appends a line of fields to file.
func note(file string, fields ...string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(fields, " ") + "\n"); err != nil {
		panic(err)
	}
}

// read returns file's content, "" if there is none.
func read(file string) string {
	b, _ := os.ReadFile(file)
	return string(b)
}

// testBin is this test binary.
func testBin(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// childArgs is the command line of a child: COMMAND [ARGS...].
func childArgs(t *testing.T, args ...string) []string {
	return append([]string{testBin(t), asChild}, args...)
}

// lockedBuffer is a bytes.Buffer safe for a process's copier and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is the relock command running as a process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	start          time.Time
	done           chan struct{}
	took           time.Duration
}

// startRelock starts the relock command with args, extra environment
// variables env, and stdin (nil: none); it is killed at the end of t if
// it still runs.
func startRelock(t *testing.T, env []string, stdin io.Reader, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(testBin(t), append([]string{asCommand}, args...)...), done: make(chan struct{})}
	// A race-enabled binary sleeps 1s on exit (to let late races be
	// reported) unless told not to; the child inherits it.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	// GOTRACEBACK=all: a command that overstays wait gets SIGABRT, and
	// prints every goroutine.
	p.cmd.Env = append(append(os.Environ(), "GORACE="+gorace, "GOTRACEBACK=all"), env...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, &p.stdout, &p.stderr
	p.start = time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.took = time.Since(p.start)
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits up to d for the command to exit and returns what it did.
func (p *proc) wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		// SIGABRT (which run does not handle) makes the Go runtime print
		// where every goroutine was: what the command waited for.
		_ = p.cmd.Process.Signal(syscall.SIGABRT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("relock %s still runs after %v (SIGABRT sent)\nstdout: %s\nstderr: %s", strings.Join(p.cmd.Args[2:], " "), d, p.stdout.String(), p.stderr.String())
	}
	r := result{code: exitCode(p.cmd.ProcessState), stdout: p.stdout.String(), stderr: p.stderr.String(), took: p.took}
	t.Logf("relock %s: exit %d in %v\n%s%s", strings.Join(p.cmd.Args[2:], " "), r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
	return r
}

// running reports whether the command still runs.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// relockProc runs the relock command as a process and waits up to 20s for
// its end.
func relockProc(t *testing.T, args ...string) result {
	t.Helper()
	return startRelock(t, nil, nil, args...).wait(t, 30*time.Second)
}

// readyPID waits for the "ready PID" line of a child of p in file, and
// returns the PID; the child's process group is killed at the end of t.
// If none comes (within 30 s, or before p exits), it says whether p still
// runs, and what it printed.
func (p *proc) readyPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 {
		exited := !p.running() // before the read: what it wrote is there
		for _, l := range strings.Split(read(file), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "ready" {
				pid, _ = strconv.Atoi(f[1])
			}
		}
		if pid == 0 && (exited || time.Now().After(deadline)) {
			t.Fatalf("the child never wrote ready in %s (%q); relock %s running: %v\nstdout: %s\nstderr: %s",
				filepath.Base(file), read(file), strings.Join(p.cmd.Args[2:], " "), p.running(), p.stdout.String(), p.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// hasLine waits up to 5s for file to have the line.
func hasLine(t *testing.T, file, line string) {
	t.Helper()
	require.Eventually(t, func() bool { return contains(strings.Split(read(file), "\n"), line) },
		5*time.Second, 2*time.Millisecond, "%s never got %q: %q", file, line, read(file))
}

// procState is the state of process pid (R, S, T, Z...; 0 when gone), from
// /proc.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	if rest == "" {
		return 0
	}
	return rest[0]
}

// gone reports whether process pid is dead (gone, or a zombie).
func gone(pid int) bool { s := procState(pid); return s == 0 || s == 'Z' || s == 'X' }

func needProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
}

// interval is one child's run, from its "start" and "end" lines.
type interval struct{ start, end int64 }

// intervals reads the runs recorded in file by "record" children.
func intervals(t *testing.T, file string) []interval {
	t.Helper()
	starts := map[string]int64{}
	var out []interval
	for _, l := range strings.Split(strings.TrimSpace(read(file)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		switch f[0] {
		case "start":
			starts[f[1]] = ns
		case "end":
			s, ok := starts[f[1]]
			require.True(t, ok, "end without start: %q", l)
			out = append(out, interval{s, ns})
		}
	}
	return out
}

// maxConcurrent is the most intervals that overlap at one time.
func maxConcurrent(iv []interval) int {
	type event struct {
		at    int64
		delta int
	}
	var ev []event
	for _, i := range iv {
		ev = append(ev, event{i.start, 1}, event{i.end, -1})
	}
	sort.Slice(ev, func(a, b int) bool {
		if ev[a].at != ev[b].at {
			return ev[a].at < ev[b].at
		}
		return ev[a].delta < ev[b].delta // an end before a start at the same time
	})
	n, most := 0, 0
	for _, e := range ev {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// mutexToken returns the owner token that Redis holds for the mutex
// called name (a fencing mutex's value is "<token>:<fence>").
func mutexToken(t *testing.T, s *redistest.Server, name string) string {
	t.Helper()
	v, err := s.Admin(t).Get(context.Background(), core.NewKeys("mutex", name).Lock).Result()
	require.NoError(t, err)
	tok, _, _ := strings.Cut(v, ":")
	return tok
}

// lockExists reports whether the mutex called name is held.
func lockExists(t *testing.T, s *redistest.Server, name string) bool {
	t.Helper()
	n, err := s.Admin(t).Exists(context.Background(), core.NewKeys("mutex", name).Lock).Result()
	require.NoError(t, err)
	return n == 1
}

// TestRunExclusive: relock runs of one name run their children one at a
// time, every one of them.
func TestRunExclusive(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "runs")
		const runs = 6
		var ps []*proc
		for i := 0; i < runs; i++ {
			args := append([]string{"-redis", redisURL(s), "run", "-lease", "2s", name, "--"}, childArgs(t, "record", file, "100ms")...)
			ps = append(ps, startRelock(t, nil, nil, args...))
		}
		// Six runs one after another, each starting a race-enabled child
		// (5-9 s for the six on an idle machine): a CI run on a machine
		// at about 0.6x speed found one still waiting after 30 s, so the
		// six get 90 s in all.
		deadline := time.Now().Add(90 * time.Second)
		for _, p := range ps {
			r := p.wait(t, time.Until(deadline))
			require.Equal(t, 0, r.code, r.stderr)
			assert.Empty(t, withoutNotices(t, r.stderr, name))
		}
		iv := intervals(t, file)
		require.Len(t, iv, runs, "every child ran to its end")
		assert.Equal(t, 1, maxConcurrent(iv), "children of one name ran at once: %v", iv)
	})
}

// TestRunSemaphore: with -n 2, two children run at once, never three.
func TestRunSemaphore(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "runs")
		var ps []*proc
		for i := 0; i < 3; i++ {
			args := append([]string{"-redis", redisURL(s), "run", "-n", "2", "-lease", "2s", name, "--"}, childArgs(t, "record", file, "await")...)
			ps = append(ps, startRelock(t, nil, nil, args...))
		}
		starts := func() int { return strings.Count(read(file), "start ") }
		// Five processes of this race-enabled binary start first: 10 s
		// was too short for them on a loaded machine.
		require.Eventually(t, func() bool { return starts() == 2 }, 30*time.Second, 5*time.Millisecond, "two did not start")
		time.Sleep(300 * time.Millisecond)
		assert.Equal(t, 2, starts(), "a third started")
		// Each run shows who it is: its host, pid and program.
		c, _ := redistest.NewClient(t, s)
		holders, err := semaphore.New(c, name, 2).Holders(context.Background())
		require.NoError(t, err)
		var shown, runs []string
		for _, h := range holders {
			shown = append(shown, h.Metadata)
		}
		for _, p := range ps {
			runs = append(runs, runShown(t, p))
		}
		assert.Len(t, shown, 2)
		assert.Subset(t, runs, shown, "the holders' metadata")
		note(file+".go", "go") // the children end; the third starts, and ends
		for _, p := range ps {
			r := p.wait(t, 30*time.Second)
			require.Equal(t, 0, r.code, r.stderr)
		}
		iv := intervals(t, file)
		require.Len(t, iv, 3, "every child ran to its end")
		assert.Equal(t, 2, maxConcurrent(iv), "not two at once, or three: %v", iv)
	})
}

// runShown is the metadata that the relock run p shows on its hold.
func runShown(t *testing.T, p *proc) string {
	t.Helper()
	host, err := os.Hostname()
	require.NoError(t, err)
	return fmt.Sprintf("relock run on %s pid %d: %s", host, p.cmd.Process.Pid, filepath.Base(testBin(t)))
}

// TestRunMetadata: a run's hold shows who it is (its host, pid and
// program, not its arguments) to Holders and relock inspect.
func TestRunMetadata(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "runs")
		p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "record", file, "await")...)...)
		require.Eventually(t, func() bool { return strings.Contains(read(file), "start ") }, 30*time.Second, 5*time.Millisecond, "the child did not start")
		want := runShown(t, p)
		c, _ := redistest.NewClient(t, s)
		holders, err := mutex.New(c, name).Holders(context.Background())
		require.NoError(t, err)
		require.Len(t, holders, 1)
		assert.Equal(t, want, holders[0].Metadata)
		r := relockCmd(t, "", "-redis", redisURL(s), "inspect", name)
		require.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, want, "inspect shows the run")
		assert.NotContains(t, r.stdout, asChild, "inspect shows COMMAND's arguments")
		note(file+".go", "go")
		require.Equal(t, 0, p.wait(t, 30*time.Second).code)
	})
}

// TestRunTry: -try gives up at once, with status 75, while another owner
// holds the lock, and runs the command when it is free. "At once": it
// never waits in the lock's queue (as a wait does after its first
// attempt). It was a bound on the process's run, under 5 s, which a
// loaded machine overran just starting this race-enabled binary (5.9 s;
// 4.8 s for a run that got the lock).
func TestRunTry(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		admin := s.Admin(t)
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "runs")
		args := func(flags ...string) []string {
			a := append(append([]string{"-redis", redisURL(s), "run"}, flags...), name, "--")
			return append(a, childArgs(t, "record", file, "0s")...)
		}
		// try runs relock run -try (a lock of kind), watching kind's
		// queue for name as long as it runs.
		try := func(kind string, flags ...string) result {
			t.Helper()
			queue := core.NewKeys(kind, name).Queue
			p := startRelock(t, nil, nil, args(append([]string{"-try"}, flags...)...)...)
			queued := false
			for p.running() && !queued {
				queued = admin.ZCard(ctx, queue).Val() > 0
				time.Sleep(2 * time.Millisecond)
			}
			r := p.wait(t, 30*time.Second)
			assert.False(t, queued, "-try waited in the %s's queue", kind)
			return r
		}

		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))
		r := try("mutex")
		oneLineError(t, r, exitNotObtained, `relock: run: mutex "`+name+`" is held elsewhere; COMMAND not run (-try)`)
		require.NoError(t, m.Unlock(ctx))
		r = relockProc(t, args("-try")...)
		require.Equal(t, 0, r.code)

		sem := semaphore.New(c, name, 2)
		require.NoError(t, sem.Acquire(ctx, 2))
		r = try("semaphore", "-n", "2")
		oneLineError(t, r, exitNotObtained, `relock: run: semaphore "`+name+`" (2 permits) is held elsewhere; COMMAND not run (-try)`)
		require.NoError(t, sem.Release(ctx, 1))
		r = relockProc(t, args("-try", "-n", "2")...)
		require.Equal(t, 0, r.code)
		require.NoError(t, sem.Release(ctx, 1))
		assert.Len(t, intervals(t, file), 2, "the command ran exactly when the lock was free")
	})
}

// TestRunTimeout: -timeout D gives up after about D with status 75, and a
// run that gets the lock within D runs the command; the wait may outlast
// -call-timeout. The bounds count from the run seen waiting (in the
// mutex's queue) and to the lock seen taken: a relock run and its child
// are processes of this race-enabled test binary, whose start took
// seconds on a loaded machine (3.6 s to give up after -timeout 500ms).
func TestRunTimeout(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		admin := s.Admin(t) // one client for every poll, and no t in them
		name := redistest.Name(t)
		keys := core.NewKeys("mutex", name)
		file := filepath.Join(t.TempDir(), "runs")
		m := mutex.New(c, name)
		require.NoError(t, m.Lock(ctx))

		args := func(timeout string) []string {
			a := []string{"-redis", redisURL(s), "run", "-call-timeout", "200ms", "-timeout", timeout, name, "--"}
			return append(a, childArgs(t, "record", file, "0s")...)
		}
		// queued waits until p waits in the mutex's queue, and returns
		// when it was seen there.
		queued := func(p *proc) time.Time {
			t.Helper()
			require.Eventually(t, func() bool { return admin.ZCard(ctx, keys.Queue).Val() == 1 || !p.running() },
				20*time.Second, 2*time.Millisecond)
			require.True(t, p.running(), "relock run ended before it was seen waiting:\n%s%s", p.stdout.String(), p.stderr.String())
			return time.Now()
		}

		// -timeout 1s (500 ms was shorter than a loaded machine took to
		// be seen waiting).
		p := startRelock(t, nil, nil, args("1s")...)
		waiting := queued(p)
		r := p.wait(t, 30*time.Second)
		r.stderr = withoutNotices(t, r.stderr, name) // it waited a second (TestRunWaitNotice)
		oneLineError(t, r, exitNotObtained, `relock: run: mutex "`+name+`" not obtained within -timeout 1s; COMMAND not run`)
		assert.GreaterOrEqual(t, r.took, time.Second)
		assert.Less(t, p.start.Add(r.took).Sub(waiting), 2500*time.Millisecond, "the run gave up long after -timeout")
		assert.Empty(t, read(file), "the command ran")
		assert.Zero(t, admin.ZCard(ctx, keys.Queue).Val(), "the run that gave up is still queued")

		p = startRelock(t, nil, nil, args("10s")...)
		queued(p)
		time.Sleep(600 * time.Millisecond) // waiting, past -call-timeout
		require.True(t, p.running(), "gave up early")
		released := time.Now()
		require.NoError(t, m.Unlock(ctx))
		// Taken: the lock's key is back (relock run holds it while its
		// child runs), or the child has started.
		require.Eventually(t, func() bool { return admin.Exists(ctx, keys.Lock).Val() == 1 || read(file) != "" },
			10*time.Second, 2*time.Millisecond, "relock run never got the lock")
		assert.Less(t, time.Since(released), 3*time.Second, "it did not get the lock soon after the release")
		r = p.wait(t, 30*time.Second)
		require.Equal(t, 0, r.code)
		assert.Len(t, intervals(t, file), 1)
	})
}

// TestRunWaitNotice: a run that has waited a second for the lock says so
// on stderr, once, naming the holders by fingerprint and metadata (never
// by token), in one line.
func TestRunWaitNotice(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		c, _ := redistest.NewClient(t, s)
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "runs")
		args := func(flags ...string) []string {
			a := append(append([]string{"-redis", redisURL(s), "run"}, flags...), name, "--")
			return append(a, childArgs(t, "record", file, "0s")...)
		}
		// Metadata with a line break: the notice stays one line.
		m := mutex.New(c, name, relock.WithMetadata("nightly report\nrun 7"))
		require.NoError(t, m.Lock(ctx))
		r := relockProc(t, args("-timeout", "3s")...)
		assert.Equal(t, exitNotObtained, r.code)
		assert.Equal(t, `relock: run: waiting for mutex "`+name+`", held by owner `+m.Fingerprint()+` ("nightly report\nrun 7")`+"\n"+
			`relock: run: mutex "`+name+`" not obtained within -timeout 3s; COMMAND not run`+"\n", r.stderr)
		assert.NotContains(t, r.stderr, m.Token())
		require.NoError(t, m.Unlock(ctx))

		// A semaphore's holders, all of them named.
		a := semaphore.New(c, name, 2)
		b := semaphore.New(c, name, 2, relock.WithMetadata("encoder 2"))
		require.NoError(t, a.Acquire(ctx, 1))
		require.NoError(t, b.Acquire(ctx, 1))
		r = relockProc(t, args("-n", "2", "-timeout", "3s")...)
		assert.Equal(t, exitNotObtained, r.code)
		notice, _, _ := strings.Cut(r.stderr, "\n")
		assert.True(t, strings.HasPrefix(notice, `relock: run: waiting for semaphore "`+name+`" (2 permits), held by 2 owners: `), notice)
		assert.Contains(t, notice, a.Fingerprint())
		assert.Contains(t, notice, b.Fingerprint()+` ("encoder 2")`)
		assert.NotContains(t, r.stderr, a.Token())
		assert.NotContains(t, r.stderr, b.Token())
		require.NoError(t, a.Release(ctx, 1))
		require.NoError(t, b.Release(ctx, 1))
		assert.Empty(t, read(file), "the command ran")
	})
}

// withoutNotices is stderr without the wait notices of relock run on
// name (TestRunWaitNotice), which a run prints once it has waited a
// second: at most one.
func withoutNotices(t *testing.T, stderr, name string) string {
	t.Helper()
	var kept []string
	notices := 0
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if strings.HasPrefix(line, "relock: run: waiting for ") && strings.Contains(line, `"`+name+`"`) {
			notices++
			continue
		}
		kept = append(kept, line)
	}
	assert.LessOrEqual(t, notices, 1, "more than one wait notice:\n%s", stderr)
	return strings.Join(kept, "")
}

// TestRunLost: when the hold is lost (its key deleted, or the lock
// force-unlocked), the child's process group gets SIGTERM, then SIGKILL
// after -grace, and relock run exits with status 124; it shows the
// owner's fingerprint, never its token.
func TestRunLost(t *testing.T) {
	redistest.Parallel(t)
	const lease = time.Second // renewed every 333ms: a deletion is seen within that
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		t.Run("SIGTERM", func(t *testing.T) {
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "signals")
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", "-lease", lease.String(), name, "--"},
				childArgs(t, "signals", file)...)...)
			p.readyPID(t, file)
			note(file+".go", "go") // exit on the signal
			tok := mutexToken(t, s, name)
			require.NoError(t, s.Admin(t).Del(context.Background(), core.NewKeys("mutex", name).Lock).Err())
			deleted := time.Now()
			r := p.wait(t, 30*time.Second)
			assert.Equal(t, exitLost, r.code)
			assert.Equal(t, "ready "+strings.Fields(read(file))[1]+"\nSIGTERM\nexit\n", read(file), "the child's SIGTERM")
			// A renewal, the child's exit, the release: slack for a loaded machine.
			assert.Less(t, time.Since(deleted), lease/3+2*time.Second)
			assert.Contains(t, r.stderr, `relock: run: mutex "`+name+`", held as owner `+core.Fingerprint(tok)+`: lock not held: lock gone`)
			assert.Contains(t, r.stderr, "stopping COMMAND (SIGTERM, SIGKILL after -grace 3s)")
			assert.Contains(t, r.stderr, "relock: run: COMMAND exited with status 7 after the hold was lost\n")
			assert.NotContains(t, r.stderr, tok)
			assert.Empty(t, r.stdout)
		})
		t.Run("SIGKILL", func(t *testing.T) {
			const grace = time.Second
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "signals")
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", "-lease", lease.String(), "-grace", grace.String(), name, "--"},
				childArgs(t, "signals", file, "ignore-term", "spawn")...)...)
			pid, gpid := p.readyPID(t, file), p.readyPID(t, file+".g")
			tok := mutexToken(t, s, name)
			fu := relockCmd(t, "", "-redis", redisURL(s), "-yes", "force-unlock", name)
			require.Equal(t, 0, fu.code)
			hasLine(t, file, "SIGTERM")
			term := time.Now()
			hasLine(t, file+".g", "SIGTERM") // the whole process group
			r := p.wait(t, 30*time.Second)
			assert.Equal(t, exitLost, r.code)
			took := time.Since(term)
			assert.Greater(t, took, grace/2, "SIGKILL long before -grace") // the test sees SIGTERM late on a loaded machine
			assert.Less(t, took, grace+3*time.Second)
			assert.NotContains(t, read(file), "exit")
			assert.True(t, gone(pid), "the child runs on")
			assert.Eventually(t, func() bool { return gone(gpid) }, 2*time.Second, 10*time.Millisecond, "the grandchild runs on")
			assert.Contains(t, r.stderr, "relock: run: COMMAND was killed by SIGKILL after the hold was lost\n")
			assert.NotContains(t, r.stderr, tok)
		})
		t.Run("SIGKILL of what the child leaves", func(t *testing.T) {
			// The child exits on SIGTERM; the grandchild it started
			// ignores SIGTERM, and would run on without the lock: it gets
			// SIGKILL at -grace, and run exits then.
			const grace = time.Second
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "signals")
			note(file+".go", "go") // the child exits on the signal
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", "-lease", lease.String(), "-grace", grace.String(), name, "--"},
				childArgs(t, "signals", file, "spawn")...)...)
			_, gpid := p.readyPID(t, file), p.readyPID(t, file+".g")
			require.NoError(t, s.Admin(t).Del(context.Background(), core.NewKeys("mutex", name).Lock).Err())
			hasLine(t, file+".g", "SIGTERM")
			term := time.Now()
			r := p.wait(t, 30*time.Second)
			took := time.Since(term)
			assert.Equal(t, exitLost, r.code)
			// run exits once it has sent SIGKILL, which takes effect when
			// the kernel next runs the process: a moment later on a loaded
			// machine (CI29 still saw it running).
			assert.Eventually(t, func() bool { return gone(gpid) }, 2*time.Second, 10*time.Millisecond,
				"the grandchild runs on after relock run exited")
			assert.Greater(t, took, grace/2, "run exited before -grace, with the grandchild left")
			assert.Less(t, took, grace+3*time.Second)
			assert.Contains(t, r.stderr, "relock: run: COMMAND exited with status 7 after the hold was lost\n")
		})
		t.Run("at release", func(t *testing.T) {
			// Deleted and the child done before a renewal (every 10s with
			// the default lease) could notice: the release finds it.
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "await")
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "await", file)...)...)
			p.readyPID(t, file)
			tok := mutexToken(t, s, name)
			require.NoError(t, s.Admin(t).Del(context.Background(), core.NewKeys("mutex", name).Lock).Err())
			note(file+".go", "go")
			r := p.wait(t, 30*time.Second)
			oneLineError(t, r, exitLost, `relock: run: mutex "`+name+`", held as owner `+core.Fingerprint(tok)+
				`: found lost at its release (mutex: unlock "`+name+`": relock: lock not held`)
			assert.Contains(t, r.stderr, "; COMMAND exited with status 0\n")
			assert.NotContains(t, r.stderr, tok)
		})
	})
}

// TestRunSignals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to relock run
// reach the child; the lock is released once the child has exited, and
// relock run exits with the child's status (128+N for a child killed by
// signal N). A signal during the wait ends it (128+N), and leaves nothing
// behind. Signals do not depend on the server: on redis-server only.
func TestRunSignals(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
			t.Run(signalName(sig), func(t *testing.T) {
				name := redistest.Name(t)
				file := filepath.Join(t.TempDir(), "signals")
				p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "signals", file)...)...)
				pid := p.readyPID(t, file)
				require.NoError(t, p.cmd.Process.Signal(sig))
				hasLine(t, file, signalName(sig))
				time.Sleep(100 * time.Millisecond)
				assert.True(t, lockExists(t, s, name), "released before the child exited")
				note(file+".go", "go") // the child exits
				r := p.wait(t, 30*time.Second)
				assert.Equal(t, 7, r.code, "the child's status")
				assert.Equal(t, "ready "+strconv.Itoa(pid)+"\n"+signalName(sig)+"\nexit\n", read(file), "the child got the signal once")
				assert.False(t, lockExists(t, s, name), "not released") // the lease is 30s: released, not expired
				assert.Empty(t, r.stderr)
			})
		}
		t.Run("killed", func(t *testing.T) {
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "sleep")
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "sleep", file)...)...)
			p.readyPID(t, file)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			r := p.wait(t, 30*time.Second)
			assert.Equal(t, 128+int(syscall.SIGTERM), r.code)
			assert.False(t, lockExists(t, s, name))
		})
		t.Run("waiting", func(t *testing.T) {
			ctx := context.Background()
			c, rdb := redistest.NewClient(t, s)
			name := redistest.Name(t)
			file := filepath.Join(t.TempDir(), "runs")
			m := mutex.New(c, name)
			require.NoError(t, m.Lock(ctx))
			p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "record", file, "0s")...)...)
			// Waiting (in the queue; its signal handler is set before it
			// asks), not still starting up: a signal then would kill it.
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, "relock:mutex:{"+name+"}:queue").Val() == 1 },
				10*time.Second, 5*time.Millisecond, "relock run never queued")
			require.True(t, p.running())
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
			r := p.wait(t, 15*time.Second)
			r.stderr = withoutNotices(t, r.stderr, name) // if a loaded machine took a second to signal it
			oneLineError(t, r, 128+int(syscall.SIGINT), `relock: run: interrupted by SIGINT while waiting for mutex "`+name+`"; COMMAND not run`)
			assert.Empty(t, read(file), "the command ran")
			require.NoError(t, m.Unlock(ctx))
			// Nothing left behind (a waiter's place): the lock is free.
			r = relockProc(t, append([]string{"-redis", redisURL(s), "run", "-try", name, "--"}, childArgs(t, "record", file, "0s")...)...)
			assert.Equal(t, 0, r.code)
		})
	})
}

// TestRunSuspend: ^Z (SIGTSTP) to relock run stops the child and relock
// run; SIGCONT continues both.
func TestRunSuspend(t *testing.T) {
	redistest.Parallel(t)
	needProc(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "sleep")
		p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "sleep", file)...)...)
		pid := p.readyPID(t, file)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTSTP))
		states := func() string { return string([]byte{procState(pid), procState(p.cmd.Process.Pid)}) } // child, relock run
		require.Eventually(t, func() bool { return states() == "TT" }, 5*time.Second, 5*time.Millisecond, "not both stopped")
		time.Sleep(200 * time.Millisecond)
		assert.Equal(t, "TT", states(), "not both still stopped")
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
		require.Eventually(t, func() bool { return !strings.Contains(states(), "T") }, 5*time.Second, 5*time.Millisecond, "not both continued")
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 128+int(syscall.SIGTERM), p.wait(t, 30*time.Second).code)
	})
}

// TestRunCrash: a relock run killed by SIGKILL takes its child with it
// (Linux), and its lock is freed within -lease.
func TestRunCrash(t *testing.T) {
	redistest.Parallel(t)
	needProc(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		const lease = time.Second
		name := redistest.Name(t)
		file := filepath.Join(t.TempDir(), "sleep")
		p := startRelock(t, nil, nil, append([]string{"-redis", redisURL(s), "run", "-lease", lease.String(), name, "--"}, childArgs(t, "sleep", file)...)...)
		pid := p.readyPID(t, file)
		require.NoError(t, p.cmd.Process.Kill())
		killed := time.Now()
		// Not p.done: that waits for the end of relock run's stdout and
		// stderr, which the child has too.
		require.Eventually(t, func() bool { return gone(p.cmd.Process.Pid) }, 2*time.Second, 5*time.Millisecond)
		assert.Eventually(t, func() bool { return gone(pid) }, 2*time.Second, 5*time.Millisecond, "the child runs on")
		admin := s.Admin(t) // one client for every poll, and no t in it
		key := core.NewKeys("mutex", name).Lock
		require.Eventually(t, func() bool { return admin.Exists(context.Background(), key).Val() == 0 },
			lease+2*time.Second, 10*time.Millisecond, "the lock was not freed")
		t.Logf("lock freed %v after the crash", time.Since(killed).Round(time.Millisecond))
	})
}

// TestRunStdio: the child reads relock run's stdin and writes to its
// stdout and stderr, and its exit status is relock run's.
func TestRunStdio(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		for _, code := range []int{0, 3} {
			name := redistest.Name(t)
			p := startRelock(t, nil, strings.NewReader("hello\nworld\n"),
				append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "io", strconv.Itoa(code))...)...)
			r := p.wait(t, 30*time.Second)
			assert.Equal(t, code, r.code)
			assert.Equal(t, "hello\nworld\n", r.stdout)
			assert.Equal(t, "to stderr\n", r.stderr)
		}
	})
}

// TestRunEnv: the child has RELOCK_NAME and RELOCK_FENCE, the hold's
// fencing token (strictly increasing per name), or with -n, RELOCK_FENCE
// empty; values inherited from relock run's environment are replaced.
func TestRunEnv(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		stale := []string{"RELOCK_NAME=stale", "RELOCK_FENCE=99"}
		for _, fence := range []string{"1", "2"} {
			r := startRelock(t, stale, nil, append([]string{"-redis", redisURL(s), "run", name, "--"}, childArgs(t, "env")...)...).wait(t, 30*time.Second)
			require.Equal(t, 0, r.code)
			assert.Equal(t, "RELOCK_NAME="+name+"\nRELOCK_FENCE="+fence+"\n", r.stdout)
		}
		r := startRelock(t, stale, nil, append([]string{"-redis", redisURL(s), "run", "-n", "2", name, "--"}, childArgs(t, "env")...)...).wait(t, 30*time.Second)
		require.Equal(t, 0, r.code)
		assert.Equal(t, "RELOCK_NAME="+name+"\nRELOCK_FENCE=\n", r.stdout)
	})
}

// TestRunExitStatus: usage errors exit 2 and failures 1 (before any child
// runs), a COMMAND not found 127 and one not executable 126.
func TestRunExitStatus(t *testing.T) {
	redistest.Parallel(t)
	closed := "redis://" + freeAddr(t)
	noExec := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, 2, "run: missing [flags] NAME -- COMMAND [ARGS...]"},
		{[]string{"run", "x"}, 2, "run: missing -- between NAME and COMMAND"},
		{[]string{"run", "x", "true"}, 2, "run: missing -- between NAME and COMMAND"},
		{[]string{"run", "x", "-try", "--", "true"}, 2, "(run's flags go before NAME; usage: relock run [flags] NAME -- COMMAND [ARGS...])"},
		{[]string{"run", "x", "--"}, 2, "run: missing COMMAND after --"},
		{[]string{"run", "-n", "0", "x", "--", "true"}, 2, "run: -n 0 outside [1, 2147483647]"},
		{[]string{"run", "-try", "-timeout", "1s", "x", "--", "true"}, 2, "run: -try and -timeout exclude each other"},
		{[]string{"run", "-timeout", "-1s", "x", "--", "true"}, 2, "run: -timeout must not be negative"},
		{[]string{"run", "-grace", "-1s", "x", "--", "true"}, 2, "run: -grace must not be negative"},
		{[]string{"run", "-lease", "1ms", "x", "--", "true"}, 2, "relock: invalid option: -lease 1ms outside [10ms, 168h0m0s]"},
		{[]string{"run", "-call-timeout", "0s", "x", "--", "true"}, 2, "-call-timeout must be positive"},
		{[]string{"run", "}x", "--", "true"}, 2, "invalid lock name"},
		{[]string{"-timeout", "1s", "run", "x", "--", "true"}, 2, "run: -timeout before run: run's -timeout is how long to wait for the lock"},
		{[]string{"run", "x", "--", "relock-no-such-command"}, exitNotFound, `run: exec: "relock-no-such-command": executable file not found in $PATH`},
		{[]string{"run", "x", "--", noExec}, exitCannotExec, "permission denied"},
		{[]string{"run", "x", "--", filepath.Join(noExec, "..", "nothing")}, exitNotFound, "no such file or directory"},
		{[]string{"run", "x", "--", "true"}, 1, "connection refused"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := relockCmd(t, "", append([]string{"-redis", closed}, tc.args...)...)
			oneLineError(t, r, tc.code, tc.want)
		})
	}

	// Found and executable, but not a program: the exec fails once the
	// lock is held, which is then released.
	garbage := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755))
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		r := relockCmd(t, "", "-redis", redisURL(s), "run", name, "--", garbage)
		oneLineError(t, r, exitCannotExec, "exec format error")
		assert.False(t, lockExists(t, s, name), "not released")
	})
}

// TestRunHelp: run -h says what -timeout means for run, the environment
// and the exit statuses, in 80 columns.
func TestRunHelp(t *testing.T) {
	redistest.Parallel(t)
	r := relockCmd(t, "", "run", "-h")
	require.Equal(t, 0, r.code)
	for _, want := range []string{
		"usage: relock [flags] run [flags] NAME -- COMMAND [ARGS...]",
		"After run, -timeout is how long to wait for the lock", "-call-timeout D\n", "-timeout D\n", "-grace D\n", "-lease D\n", "-n N\n", "-try\n",
		"RELOCK_NAME=NAME", "RELOCK_FENCE=", "SIGTERM, and SIGKILL after -grace",
		"75 the lock was not", "124 the hold was lost", "126 COMMAND not executable", "127 COMMAND not found",
		"(default 3s)", "(default 30s)",
	} {
		assert.Contains(t, r.stdout, want)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if i := strings.LastIndex(l, "\t"); i >= 0 {
			l = strings.Repeat(" ", (i/8+1)*8) + l[i+1:] // the tab's column
		}
		assert.LessOrEqual(t, len(l), 80, "%q", l)
	}
}

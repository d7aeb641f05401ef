package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/semaphore"
)

// Exit statuses of run besides the child's own, 1 and 2.
const (
	exitNotObtained = 75  // the lock was not obtained (-try, -timeout): sysexits' EX_TEMPFAIL
	exitLost        = 124 // the hold was lost and the child stopped, as timeout(1) reports a stopped command
	exitCannotExec  = 126 // COMMAND is not executable, as in sh
	exitNotFound    = 127 // COMMAND was not found, as in sh
)

// defaultGrace is run's -grace: see the package documentation.
const defaultGrace = 3 * time.Second

// runHelp is the text of relock run -h between the summary and the flags.
const runHelp = `It waits for the lock NAME (a mutex, with fencing; with -n N, one permit of
a semaphore of N), then starts COMMAND in a process group of its own, with
stdin, stdout and stderr passed through, RELOCK_NAME=NAME and
RELOCK_FENCE=<the hold's fencing token> (empty with -n N: a semaphore has no
fencing token) in its environment, and releases the lock when it exits.
The fencing token's counter, relock:mutex:{NAME}:fence, is a key without
TTL that stays after the run (it must outlive every hold to keep
increasing): one small key per NAME ever run, deleted only by hand.
Every run of one NAME must use the same -n. The hold's metadata, which
relock inspect shows, is "relock run on HOST pid PID: PROGRAM" (COMMAND's
program name, not its arguments). A run that has waited a second for a
lock held elsewhere says so on stderr, once, naming the holders by
fingerprint and metadata.

If the hold is lost (lease expired, lock deleted), the child's process group
gets SIGTERM, and SIGKILL after -grace. SIGINT, SIGTERM, SIGHUP and SIGQUIT
sent to relock run are passed on to the child's process group (while it
waits, they end the wait: exit 128+N); ^Z (SIGTSTP) stops the child and
relock run. The child cannot read the terminal: it is not in the terminal's
foreground process group.

After run, -timeout is how long to wait for the lock (before the other
subcommands, the bound on Redis calls); -call-timeout bounds each Redis call.
A relock run that crashed leaves its lock for at most -lease (on Linux, its
child is killed with it).

Exit status: COMMAND's (128+N if signal N killed it); 75 the lock was not
obtained (-try, -timeout: COMMAND did not run); 124 the hold was lost and
COMMAND stopped; 126 COMMAND not executable; 127 COMMAND not found; 1 other
failures (Redis unreachable...); 2 usage error.
`

func runFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.permits, "n", 1, "with `N` > 1, hold one permit of a semaphore of N permits\n(at most N runs at once) instead of the mutex")
	fs.BoolVar(&o.try, "try", false, "if the lock is held elsewhere, exit 75 at once")
	fs.DurationVar(&o.wait, "timeout", 0, "if the lock is not obtained within `D`, exit 75\n(0: wait as long as it takes)")
	fs.DurationVar(&o.grace, "grace", defaultGrace, "if the hold is lost, SIGKILL the child `D` after SIGTERM")
	fs.DurationVar(&o.lease, "lease", core.DefaultWatchdogLease, "the lock's lease, renewed every third of it while the child\nruns: a crashed relock run's lock is freed within `D`")
}

// cmdRun runs a command while holding a lock: args are NAME, "--",
// COMMAND and its arguments. See the package documentation.
func cmdRun(e *env, args []string) error {
	name, argv, err := runArgs(args)
	if err != nil {
		return err
	}
	o := e.opts
	switch {
	case o.permits < 1 || o.permits > semaphore.MaxPermits:
		return usagef("run: -n %d outside [1, %d]", o.permits, semaphore.MaxPermits)
	case o.wait < 0:
		return usagef("run: -timeout must not be negative")
	case o.try && o.wait > 0:
		return usagef("run: -try and -timeout exclude each other")
	case o.grace < 0:
		return usagef("run: -grace must not be negative")
	}
	if err := core.CheckLease("-lease", o.lease); err != nil {
		return usageError{err}
	}
	if err := core.CheckName(name); err != nil {
		return usageError{err}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return execFailed(err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.out, e.errw
	if err := prepareChild(cmd); err != nil {
		return err
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)

	c := relock.New(e.rdb, relock.WithWatchdogTimeout(o.lease))
	defer c.Close()
	l := newRunLock(c, name, o.permits, runMetadata(argv[0]))
	if err := l.acquire(e, sigs); err != nil {
		return err
	}
	hold := l.holdContext(context.Background())
	cmd.Env = append(os.Environ(), "RELOCK_NAME="+name, "RELOCK_FENCE="+l.fence())
	if hold.Err() != nil {
		// Lost between the acquire and now: the child never runs unlocked.
		_ = l.unlock(context.Background())
		return exitStatus{exitLost, fmt.Errorf("run: %s: %s; COMMAND not started", l.held(), plain(context.Cause(hold)))}
	}
	if err := cmd.Start(); err != nil {
		if uerr := l.unlock(context.Background()); uerr != nil {
			fmt.Fprintf(e.errw, "relock: run: release %s: %s\n", l.held(), plain(uerr))
		}
		return execFailed(err)
	}
	lost := supervise(e, cmd, hold, sigs, l)

	// The child has exited: release the lock, and say how it went.
	if lost == nil {
		if cause := context.Cause(hold); hold.Err() != nil {
			lost = cause // lost as the child exited
		}
	}
	uerr := l.unlock(context.Background())
	code := exitCode(cmd.ProcessState)
	if lost == nil && errors.Is(uerr, relock.ErrNotHeld) {
		// Lost before the release, unnoticed until now: mutual
		// exclusion may not have held until the child's end.
		return exitStatus{exitLost, fmt.Errorf("run: %s: found lost at its release (%s); COMMAND %s",
			l.held(), plain(uerr), describe(cmd.ProcessState))}
	}
	if lost != nil {
		return exitStatus{exitLost, fmt.Errorf("run: COMMAND %s after the hold was lost", describe(cmd.ProcessState))}
	}
	if uerr != nil {
		// Unknown outcome (Redis unreachable): the lock ends with its lease.
		fmt.Fprintf(e.errw, "relock: run: release %s: %s (it expires within -lease %v)\n", l.held(), plain(uerr), o.lease)
	}
	return exitStatus{code: code}
}

// runArgs splits run's arguments: NAME -- COMMAND [ARGS...].
func runArgs(args []string) (name string, argv []string, err error) {
	const usage = "usage: relock run [flags] NAME -- COMMAND [ARGS...]"
	switch {
	case len(args) < 2 || args[1] != "--":
		return "", nil, usagef("run: missing -- between NAME and COMMAND (run's flags go before NAME; %s)", usage)
	case len(args) < 3:
		return "", nil, usagef("run: missing COMMAND after -- (%s)", usage)
	}
	return args[0], args[2:], nil
}

// execFailed is the exit status of a COMMAND that could not be started:
// 127 if it was not found, else 126 (not executable, not a program...).
func execFailed(err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) || errors.Is(err, fs.ErrNotExist) {
		return exitStatus{exitNotFound, fmt.Errorf("run: %w", err)}
	}
	return exitStatus{exitCannotExec, fmt.Errorf("run: %w", err)}
}

// supervise waits for the child to exit. It passes the signals that
// relock run receives on to the child's process group, and when the hold
// ends (it is lost) sends it SIGTERM, then SIGKILL after -grace: to the
// whole group, so it waits, after a child that exited on SIGTERM, until
// the rest of its group has exited too, or got SIGKILL. It returns why the
// hold was lost, or nil.
func supervise(e *env, cmd *exec.Cmd, hold context.Context, sigs <-chan os.Signal, l *runLock) (lost error) {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(exited)
	}()
	pid := cmd.Process.Pid
	holdDone := hold.Done()
	var kill, poll <-chan time.Time
	for {
		select {
		case <-exited:
			if kill == nil || !groupAlive(pid) {
				return lost
			}
			// COMMAND exited on SIGTERM after the hold was lost, and left
			// processes of its group running, without the lock: they get
			// SIGKILL at -grace too, unless they exit first.
			exited = nil
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			poll = tick.C
		case <-poll:
			if !groupAlive(pid) {
				return lost
			}
		case s := <-sigs:
			if !jobControl(s, pid) {
				signalGroup(pid, s)
			}
		case <-holdDone:
			holdDone = nil
			lost = context.Cause(hold)
			fmt.Fprintf(e.errw, "relock: run: %s: %s; stopping COMMAND (SIGTERM, SIGKILL after -grace %v)\n", l.held(), plain(lost), e.opts.grace)
			signalGroup(pid, syscall.SIGTERM)
			t := time.NewTimer(e.opts.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			signalGroup(pid, syscall.SIGKILL)
			if exited == nil {
				return lost
			}
		}
	}
}

// runLock is the lock of a run: a mutex with fencing, or one permit of a
// semaphore.
type runLock struct {
	m *mutex.Mutex
	s *semaphore.Semaphore
}

func newRunLock(c *relock.Client, name string, permits int, meta string) *runLock {
	if permits > 1 {
		return &runLock{s: semaphore.New(c, name, permits, relock.WithMetadata(meta))}
	}
	return &runLock{m: mutex.New(c, name, relock.WithFencing(), relock.WithMetadata(meta))}
}

// runMetadata is what a run shows as its hold's metadata (relock inspect
// and the lock handles' Holders): "relock run on HOST pid PID: PROGRAM",
// with COMMAND's program name only (its arguments may hold secrets), at
// most the 256 bytes WithMetadata takes.
func runMetadata(program string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "?"
	}
	m := fmt.Sprintf("relock run on %s pid %d: %s", host, os.Getpid(), filepath.Base(program))
	for len(m) > 256 {
		_, size := utf8.DecodeLastRuneInString(m)
		m = m[:len(m)-size]
	}
	return m
}

// String names the lock, for messages.
func (l *runLock) String() string {
	if l.s != nil {
		return fmt.Sprintf("semaphore %q (%d permits)", l.s.Name(), l.s.Permits())
	}
	return fmt.Sprintf("mutex %q", l.m.Name())
}

// held names the lock and this run as its owner, by fingerprint (never
// by token, which is a capability), as relock inspect, events and logs
// show it.
func (l *runLock) held() string {
	fp := ""
	if l.s != nil {
		fp = l.s.Fingerprint()
	} else {
		fp = l.m.Fingerprint()
	}
	return fmt.Sprintf("%s, held as owner %s", l, fp)
}

func (l *runLock) lock(ctx context.Context) error {
	if l.s != nil {
		return l.s.Acquire(ctx, 1)
	}
	return l.m.Lock(ctx)
}

func (l *runLock) tryLock(ctx context.Context) (bool, error) {
	if l.s != nil {
		return l.s.TryAcquire(ctx, 1)
	}
	return l.m.TryLock(ctx)
}

func (l *runLock) unlock(ctx context.Context) error {
	if l.s != nil {
		return l.s.Release(ctx, 1)
	}
	return l.m.Unlock(ctx)
}

func (l *runLock) holdContext(ctx context.Context) context.Context {
	if l.s != nil {
		return l.s.HoldContext(ctx)
	}
	return l.m.HoldContext(ctx)
}

// fence is RELOCK_FENCE: the mutex's fencing token, "" for a semaphore.
func (l *runLock) fence() string {
	if l.s != nil {
		return ""
	}
	return strconv.FormatInt(l.m.Fence(), 10)
}

// plain is err's message without its leading "relock: ", for a message
// that has one already.
func plain(err error) string { return strings.TrimPrefix(err.Error(), "relock: ") }

// signalled is the cause of a wait ended by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "interrupted by " + signalName(s.sig) }

// waitNotice is how long run waits for the lock before it says once, on
// stderr, that it waits and for whom.
const waitNotice = time.Second

// maxNamed is how many holders heldBy names.
const maxNamed = 3

// heldBy names the lock's other holders for the wait notice, by
// fingerprint and metadata (quoted if need be, as relock list shows it),
// as `owner 1a2b3c4d ("relock run on host-b pid 42: report.sh")`; "" if
// Redis could not tell within timeout or before ctx ended (a Redis that
// cannot be reached fails the wait soon), or if nobody else holds it (it
// was just released, or granted to this run): then no notice is shown.
func (l *runLock) heldBy(ctx context.Context, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		hs   []relock.Holder
		self string
		err  error
	)
	if l.s != nil {
		hs, err = l.s.Holders(ctx)
		self = l.s.Fingerprint()
	} else {
		hs, err = l.m.Holders(ctx)
		self = l.m.Fingerprint()
	}
	hs = slices.DeleteFunc(hs, func(h relock.Holder) bool { return h.Fingerprint == self })
	if err != nil || len(hs) == 0 {
		return ""
	}
	var b strings.Builder
	if len(hs) == 1 {
		b.WriteString("owner ")
	} else {
		fmt.Fprintf(&b, "%d owners: ", len(hs))
	}
	for i, h := range hs[:min(len(hs), maxNamed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(h.Fingerprint)
		if h.Metadata != "" {
			b.WriteString(" (" + displayName(h.Metadata) + ")")
		}
	}
	if len(hs) > maxNamed {
		fmt.Fprintf(&b, " and %d more", len(hs)-maxNamed)
	}
	return b.String()
}

// acquire takes the lock as the flags say: at once (-try), within -timeout,
// or waiting as long as it takes; after waitNotice of waiting it says so
// on stderr, once, naming the lock's holders (when Redis names some). A
// signal of runSignals ends the wait (exit 128+N), except those of job
// control. On failure it returns the exit status to end with; it leaves
// nothing behind in Redis.
func (l *runLock) acquire(e *env, sigs <-chan os.Signal) error {
	o := e.opts
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	if o.wait > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, o.wait)
		defer stop()
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		if o.try {
			ok, err := l.tryLock(ctx)
			done <- result{ok, err}
			return
		}
		done <- result{true, l.lock(ctx)}
	}()
	var notice <-chan time.Time
	if !o.try {
		t := time.NewTimer(waitNotice)
		defer t.Stop()
		notice = t.C
	}
	// The holders are asked for beside the wait, which a signal or the
	// lock's grant ends at once; a notice that comes after is dropped.
	holders := make(chan string, 1)
	var r result
	for waiting := true; waiting; {
		select {
		case r = <-done:
			waiting = false
		case s := <-sigs:
			if !jobControl(s, 0) {
				cancel(signalled{s})
			}
		case <-notice:
			notice = nil
			go func() { holders <- l.heldBy(ctx, o.timeout) }()
		case who := <-holders:
			select {
			case r = <-done: // the wait ended meanwhile: no notice
				waiting = false
				continue
			default:
			}
			if who != "" {
				fmt.Fprintf(e.errw, "relock: run: waiting for %s, held by %s\n", l, who)
			}
		}
	}
	var sig signalled
	switch {
	case errors.As(context.Cause(ctx), &sig):
		if r.err == nil && r.ok {
			_ = l.unlock(context.Background()) // obtained as the signal came
		}
		return exitStatus{128 + signalNumber(sig.sig), fmt.Errorf("run: %s while waiting for %s; COMMAND not run", sig, l)}
	case r.err == nil && !r.ok:
		return exitStatus{exitNotObtained, fmt.Errorf("run: %s is held elsewhere; COMMAND not run (-try)", l)}
	case errors.Is(r.err, relock.ErrNotObtained) && errors.Is(r.err, context.DeadlineExceeded) && e.ctx.Err() == nil:
		return exitStatus{exitNotObtained, fmt.Errorf("run: %s not obtained within -timeout %v; COMMAND not run", l, o.wait)}
	}
	if r.err != nil {
		return fmt.Errorf("run: %w", r.err)
	}
	return nil
}

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// options are the flags, which may be given before or after the
// subcommand.
type options struct {
	redis    string
	cluster  bool
	json     bool
	yes      bool
	timeout  time.Duration // -call-timeout (-timeout but for run)
	interval time.Duration
	count    int // watch -count

	// run's own flags
	permits int           // -n
	try     bool          // -try
	wait    time.Duration // run -timeout: 0 waits as long as it takes
	grace   time.Duration // -grace
	lease   time.Duration // -lease
}

// defaults returns the options' defaults. -redis has none: its default,
// $RELOCK_REDIS, may hold a password, which -h must not show.
func defaults() options { return options{timeout: 5 * time.Second, interval: time.Second} }

// register adds the flags that every subcommand has to fs. -timeout is
// another name of -call-timeout, except after run, whose -timeout is its
// own flag (how long to wait for the lock): waitTimeout leaves it out.
func (o *options) register(fs *flag.FlagSet, waitTimeout bool) {
	fs.StringVar(&o.redis, "redis", o.redis, "Redis `URL`, or a Cluster's node URLs, comma-separated\n(default $RELOCK_REDIS, else redis://localhost:6379)")
	fs.BoolVar(&o.cluster, "cluster", o.cluster, "treat -redis as seed nodes of a Redis Cluster")
	fs.BoolVar(&o.json, "json", o.json, "print one JSON object per lock and line")
	fs.BoolVar(&o.yes, "yes", o.yes, "force-unlock without asking for confirmation")
	fs.DurationVar(&o.timeout, "call-timeout", o.timeout, "bound `D` on each Redis call and on connecting")
	if !waitTimeout {
		fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound `D` on each Redis call, as -call-timeout (run's -timeout,\ngiven after run, is how long it waits for the lock)")
	}
	fs.DurationVar(&o.interval, "interval", o.interval, "watch's refresh period")
}

// env is what a subcommand runs with.
type env struct {
	ctx   context.Context // ends on SIGINT/SIGTERM, unless the command handles signals
	opts  options
	rdb   redis.UniversalClient
	stdin io.Reader
	in    *bufio.Reader // stdin, for answers
	echo  bool          // stdin is not a terminal: show the answers read
	out   io.Writer
	errw  io.Writer
}

// callCtx bounds one operation (a few Redis round trips) by -call-timeout
// (-timeout).
func (e *env) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, e.opts.timeout)
}

// command is one subcommand.
type command struct {
	name, args, help string
	more             string                             // -h's text after help, if any
	min, max         int                                // argument count; max < 0: no limit
	flags            func(fs *flag.FlagSet, o *options) // the subcommand's own flags
	run              func(e *env, args []string) error
	// waitTimeout: the subcommand's own flags have -timeout (see register).
	waitTimeout bool
	// signals: the subcommand handles signals itself; otherwise its ctx
	// ends on SIGINT and SIGTERM.
	signals bool
}

// commands are the subcommands, in the order usage lists them.
var commands = []*command{
	{name: "inspect", args: "NAME", min: 1, max: 1, run: cmdInspect, more: inspectHelp,
		help: "owners, counts, TTL, waiters of the locks NAME"},
	{name: "list", args: "[PATTERN]", min: 0, max: 1, run: cmdList,
		help: "the locks whose name matches PATTERN (glob, default *)"},
	{name: "force-unlock", args: "NAME", min: 1, max: 1, run: cmdForceUnlock,
		help: "delete the locks NAME if held by the owners shown"},
	{name: "watch", args: "NAME", min: 1, max: 1, run: cmdWatch, flags: watchFlags, more: inspectHelp,
		help: "inspect NAME every -interval (or -count N times)"},
	{name: "run", args: "[flags] NAME -- COMMAND [ARGS...]", min: 1, max: -1, run: cmdRun, flags: runFlags,
		waitTimeout: true, signals: true, more: runHelp,
		help: "run COMMAND while holding the lock NAME, one at a time"},
}

// inspectHelp explains inspect's columns.
const inspectHelp = `Every lock type that has a lock called NAME gets a paragraph. Owners and
waiters are shown by fingerprint (8 hex digits: what the owner's handle
returns from Fingerprint() and its logs show as owner=...; never the token).

  TTL, EXPIRES  how long the lock, or that owner's hold, lasts unless renewed
  HOLDS         an owner's re-entries (reentrant; 1 otherwise)
  QUEUE         a waiter's place; the first is served first
  ALIVE         how much longer the waiter keeps its place unless it shows
                it is alive again (live waiters do, at least every quarter
                of their heartbeat, relock.WithHeartbeat, default 5s);
                "expired": its process is gone, and the waiter is dropped
                when it reaches the head of the queue
  METADATA      what an owner or waiter gave with relock.WithMetadata
                (shown only when some did)
`

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitStatus is an error that ends the command with its code, after
// printing err unless it is nil.
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run with a context that ends the command (as SIGINT and
// SIGTERM do, for the subcommands that do not handle signals).
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	code := 1
	var ue usageError
	var st exitStatus
	switch {
	case errors.As(err, &st):
		if st.err == nil {
			return st.code
		}
		code = st.code
	case errors.As(err, &ue):
		code = 2
	}
	// One line, and one "relock:" (library errors carry their own).
	msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "relock: ")), " ")
	fmt.Fprintln(stderr, "relock: "+msg)
	return code
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := defaults()
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs, false)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return err
		}
		return usagef("%v (see relock -h)", err)
	}
	if fs.NArg() == 0 {
		return usagef("missing subcommand (see relock -h)")
	}
	var cmd *command
	for _, c := range commands {
		if c.name == fs.Arg(0) {
			cmd = c
		}
	}
	if cmd == nil {
		return usagef("unknown subcommand %q (see relock -h)", fs.Arg(0))
	}
	if cmd.waitTimeout && isSet(fs, "timeout") {
		return usagef("%s: -timeout before %s: %s's -timeout is how long to wait for the lock, given after %s; -call-timeout bounds each Redis call (see relock %s -h)",
			cmd.name, cmd.name, cmd.name, cmd.name, cmd.name)
	}
	sub := flag.NewFlagSet("relock "+cmd.name, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	o.register(sub, cmd.waitTimeout)
	if cmd.flags != nil {
		cmd.flags(sub, &o)
	}
	args, err := parseArgs(sub, fs.Args()[1:], cmd.max >= 0)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Defaults, not the values given (a -redis URL may hold a password).
			help := flag.NewFlagSet("relock "+cmd.name, flag.ContinueOnError)
			d := defaults()
			d.register(help, cmd.waitTimeout)
			if cmd.flags != nil {
				cmd.flags(help, &d)
			}
			fmt.Fprintf(stdout, "usage: relock [flags] %s %s\n\n%s.\n", cmd.name, cmd.args, cmd.help)
			if cmd.more != "" {
				fmt.Fprintf(stdout, "\n%s", cmd.more)
			}
			fmt.Fprintf(stdout, "\nflags:\n")
			help.SetOutput(stdout)
			help.PrintDefaults()
			return err
		}
		return usagef("%s: %v (see relock %s -h)", cmd.name, err, cmd.name)
	}
	switch n := len(args); {
	case n < cmd.min:
		return usagef("%s: missing %s (usage: relock %s %s)", cmd.name, cmd.args, cmd.name, cmd.args)
	case cmd.max >= 0 && n > cmd.max:
		return usagef("%s: too many arguments (usage: relock %s %s)", cmd.name, cmd.name, cmd.args)
	}
	callFlag := "-timeout"
	if cmd.waitTimeout || isSet(fs, "call-timeout") || isSet(sub, "call-timeout") {
		callFlag = "-call-timeout"
	}
	if o.timeout <= 0 {
		return usagef("%s must be positive", callFlag)
	}
	if o.interval <= 0 {
		return usagef("-interval must be positive")
	}
	if o.redis == "" {
		o.redis = os.Getenv("RELOCK_REDIS")
	}
	if o.redis == "" {
		o.redis = "redis://localhost:6379"
	}
	rdb, err := newRedis(o)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if !cmd.signals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	err = cmd.run(&env{ctx: ctx, opts: o, rdb: rdb, stdin: stdin, in: bufio.NewReader(stdin), echo: !terminal(stdin), out: stdout, errw: stderr}, args)
	var st exitStatus
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !errors.As(err, &st) {
		// Newer go-redis releases retry a refused dial until the deadline:
		// say what the deadline was.
		err = fmt.Errorf("%w (no answer from the server within %s)", err, callFlag)
	}
	return err
}

// parseArgs parses a subcommand's flags and returns its other
// arguments. With interspersed, flags may also follow them (relock list
// PATTERN -json), up to a "--"; without, the first argument that is not a
// flag ends the flags (relock run NAME COMMAND -x: the flags after NAME
// are COMMAND's).
func parseArgs(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		ended := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
		if !interspersed || ended || len(rest) == 0 {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// isSet reports whether the flag called name was given to fs.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: relock [flags] SUBCOMMAND [ARGS]\n\nrelock shows and repairs relock's locks on Redis, and runs commands under them.\n\nsubcommands:\n")
	for _, c := range commands {
		if len(c.args) > 10 {
			fmt.Fprintf(w, "  %-13s%s\n  %-24s%s\n", c.name, c.args, "", c.help)
			continue
		}
		fmt.Fprintf(w, "  %-13s%-10s %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintf(w, "\nflags (before or after the subcommand):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// newRedis makes the go-redis client of -redis: a *redis.Client for one
// URL, a *redis.ClusterClient for several or with -cluster. Every call is
// bounded by -timeout, and nothing is resent: an unreachable server fails
// the command within -timeout instead of after go-redis's retries.
func newRedis(o options) (redis.UniversalClient, error) {
	var all []*redis.Options
	for _, u := range strings.Split(o.redis, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, usagef("empty -redis URL")
		}
		if !strings.Contains(u, "://") {
			u = "redis://" + u // host:port
		}
		ro, err := redis.ParseURL(u)
		if err != nil {
			return nil, usagef("bad -redis URL%s: %v", redacted(u), urlCause(err))
		}
		all = append(all, ro)
	}
	if len(all) == 1 && !o.cluster {
		ro := all[0]
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = o.timeout, o.timeout, o.timeout, o.timeout
		ro.MaxRetries = -1
		ro.ContextTimeoutEnabled = true
		return redis.NewClient(ro), nil
	}
	first := all[0]
	co := &redis.ClusterOptions{
		Username: first.Username, Password: first.Password, TLSConfig: first.TLSConfig,
		DialTimeout: o.timeout, ReadTimeout: o.timeout, WriteTimeout: o.timeout, PoolTimeout: o.timeout,
		MaxRetries: -1, ContextTimeoutEnabled: true,
	}
	for _, ro := range all {
		if ro.DB != 0 || ro.Network == "unix" {
			return nil, usagef("bad -redis URL for a cluster: a cluster node is host:port with database 0")
		}
		co.Addrs = append(co.Addrs, ro.Addr)
	}
	return redis.NewClusterClient(co), nil
}

// redacted returns " " and u quoted without its password, or "" when u
// does not parse.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" %q", p.Redacted())
}

// urlCause drops the URL (and its password) from a url.Parse error.
func urlCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// terminal reports whether r is a terminal (whose input the user sees).
func terminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

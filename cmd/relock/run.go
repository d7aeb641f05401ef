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
	timeout  time.Duration
	interval time.Duration
	count    int // watch -count
}

// defaults returns the options' defaults. -redis has none: its default,
// $RELOCK_REDIS, may hold a password, which -h must not show.
func defaults() options { return options{timeout: 5 * time.Second, interval: time.Second} }

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.redis, "redis", o.redis, "Redis `URL`, or a Cluster's node URLs, comma-separated\n(default $RELOCK_REDIS, else redis://localhost:6379)")
	fs.BoolVar(&o.cluster, "cluster", o.cluster, "treat -redis as seed nodes of a Redis Cluster")
	fs.BoolVar(&o.json, "json", o.json, "print one JSON object per lock and line")
	fs.BoolVar(&o.yes, "yes", o.yes, "force-unlock without asking for confirmation")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on each Redis call and on connecting")
	fs.DurationVar(&o.interval, "interval", o.interval, "watch's refresh period")
}

// env is what a subcommand runs with.
type env struct {
	ctx  context.Context // ends on SIGINT/SIGTERM
	opts options
	rdb  redis.UniversalClient
	in   *bufio.Reader
	echo bool // stdin is not a terminal: show the answers read
	out  io.Writer
	errw io.Writer
}

// callCtx bounds one operation (a few Redis round trips) by -timeout.
func (e *env) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, e.opts.timeout)
}

// command is one subcommand.
type command struct {
	name, args, help string
	min, max         int                                // argument count
	flags            func(fs *flag.FlagSet, o *options) // the subcommand's own flags
	run              func(e *env, args []string) error
}

// commands are the subcommands, in the order usage lists them.
var commands = []*command{
	{name: "inspect", args: "NAME", min: 1, max: 1, run: cmdInspect,
		help: "owners, counts, TTL, waiters of the locks NAME"},
	{name: "list", args: "[PATTERN]", min: 0, max: 1, run: cmdList,
		help: "the locks whose name matches PATTERN (glob, default *)"},
	{name: "force-unlock", args: "NAME", min: 1, max: 1, run: cmdForceUnlock,
		help: "delete the locks NAME if held by the owners shown"},
	{name: "watch", args: "NAME", min: 1, max: 1, run: cmdWatch, flags: watchFlags,
		help: "inspect NAME every -interval (or -count N times)"},
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdin, stdout, stderr)
}

// runContext is run with the context that interrupts the command.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// One line, and one "relock:" (library errors carry their own).
	msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "relock: ")), " ")
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// Newer go-redis releases retry a refused dial until the deadline:
		// say what the deadline was.
		msg += " (no answer from the server within -timeout)"
	}
	fmt.Fprintln(stderr, "relock: "+msg)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := defaults()
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs)
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
	sub := flag.NewFlagSet("relock "+cmd.name, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	o.register(sub)
	if cmd.flags != nil {
		cmd.flags(sub, &o)
	}
	if err := sub.Parse(fs.Args()[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Defaults, not the values given (a -redis URL may hold a password).
			help := flag.NewFlagSet("relock "+cmd.name, flag.ContinueOnError)
			d := defaults()
			d.register(help)
			if cmd.flags != nil {
				cmd.flags(help, &d)
			}
			fmt.Fprintf(stdout, "usage: relock [flags] %s %s\n\n%s.\n\nflags:\n", cmd.name, cmd.args, cmd.help)
			help.SetOutput(stdout)
			help.PrintDefaults()
			return err
		}
		return usagef("%s: %v (see relock %s -h)", cmd.name, err, cmd.name)
	}
	switch n := sub.NArg(); {
	case n < cmd.min:
		return usagef("%s: missing %s (usage: relock %s %s)", cmd.name, cmd.args, cmd.name, cmd.args)
	case n > cmd.max:
		return usagef("%s: too many arguments (usage: relock %s %s)", cmd.name, cmd.name, cmd.args)
	}
	if o.timeout <= 0 {
		return usagef("-timeout must be positive")
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
	return cmd.run(&env{ctx: ctx, opts: o, rdb: rdb, in: bufio.NewReader(stdin), echo: !terminal(stdin), out: stdout, errw: stderr}, sub.Args())
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: relock [flags] SUBCOMMAND [ARGS]\n\nrelock shows and repairs relock's locks on Redis.\n\nsubcommands:\n")
	for _, c := range commands {
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

package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Server is the Redis server a run measures against: an embedded
// miniredis or a real server given by URL.
type Server struct {
	// URL is the server's redis:// URL.
	URL string
	// Mini is the embedded server, nil for a real one.
	Mini *miniredis.Miniredis

	opts    *redis.Options
	version string
}

// StartMini starts an embedded miniredis whose TTLs run with the wall
// clock, as a real server's do.
func StartMini() (*Server, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	m.ClockTTL(true)
	s, err := Dial("redis://" + m.Addr())
	if err != nil {
		m.Close()
		return nil, err
	}
	s.Mini = m
	s.version = "miniredis"
	return s, nil
}

// Dial connects to the real server at url (redis://host:port[/db]) and
// checks that it answers.
func Dial(url string) (*Server, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", url, err)
	}
	s := &Server{URL: url, opts: opts}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("ping %s: %w", opts.Addr, err)
	}
	s.version = serverVersion(ctx, c)
	return s, nil
}

// Real reports whether s is a real Redis server.
func (s *Server) Real() bool { return s.Mini == nil }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.opts.Addr }

// Describe names the server for reports, e.g. "redis 7.0.15 at
// 127.0.0.1:6399".
func (s *Server) Describe() string { return s.version + " at " + s.opts.Addr }

// Options returns a copy of the go-redis options for s.
func (s *Server) Options() *redis.Options {
	o := *s.opts
	return &o
}

// NewRedis returns a go-redis client on s whose commands are counted by
// cnt (which may be nil).
func (s *Server) NewRedis(cnt *Counter) *redis.Client {
	c := redis.NewClient(s.Options())
	if cnt != nil {
		c.AddHook(cnt.Hook())
	}
	return c
}

// Close stops the embedded server, if any.
func (s *Server) Close() {
	if s.Mini != nil {
		s.Mini.Close()
	}
}

// RTT measures the server's round-trip time as the median of n PINGs
// from a go-redis client, after a warm-up.
func (s *Server) RTT(ctx context.Context, n int) (time.Duration, error) {
	c := s.NewRedis(nil)
	defer c.Close()
	return pingRTT(ctx, c, n)
}

// pingRTT is the median of n PINGs from c, after a warm-up.
func pingRTT(ctx context.Context, c redis.UniversalClient, n int) (time.Duration, error) {
	for i := 0; i < 20; i++ {
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
	}
	d := make([]time.Duration, n)
	for i := range d {
		t := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		d[i] = time.Since(t)
	}
	return Summarize(d).P50, nil
}

// PubSubCalls returns how many SUBSCRIBE and UNSUBSCRIBE commands a real
// server has run so far (INFO commandstats), which client hooks do not
// see; ok is false on miniredis or when INFO fails.
func (s *Server) PubSubCalls(ctx context.Context) (n int64, ok bool) {
	st, ok := s.commandStats(ctx)
	for _, name := range []string{"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"} {
		n += st[name].calls
	}
	return n, ok
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

func (c cmdStat) sub(o cmdStat) cmdStat { return cmdStat{c.calls - o.calls, c.usec - o.usec} }

// commandStats returns a real server's INFO commandstats by command name
// (lower case); ok is false on miniredis or when INFO fails.
func (s *Server) commandStats(ctx context.Context) (map[string]cmdStat, bool) {
	if !s.Real() {
		return nil, false
	}
	c := redis.NewClient(s.Options())
	defer c.Close()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, false
	}
	return parseCommandStats(info), true
}

// parseCommandStats reads the cmdstat_ lines of INFO by command name
// (lower case).
func parseCommandStats(info string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, found := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !found || !isCmd {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		out[strings.ToLower(name)] = st
	}
	return out
}

// scriptCommands are the commands that run a script or a function; their
// time in INFO commandstats includes the commands the script calls.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// scriptTime returns the calls of scripts (EVAL, EVALSHA and their _RO
// forms) that a real server has run so far and the time spent in them;
// ok is false on miniredis or when INFO fails.
func (s *Server) scriptTime(ctx context.Context) (cmdStat, bool) {
	st, ok := s.commandStats(ctx)
	return scriptStat(st), ok
}

// scriptStat sums the calls and time of the scripts in st.
func scriptStat(st map[string]cmdStat) cmdStat {
	var n cmdStat
	for _, name := range scriptCommands {
		n.calls += st[name].calls
		n.usec += st[name].usec
	}
	return n
}

// serverTime turns the script calls of a window into a ServerTime, per
// operation of ops; nil when unknown.
func serverTime(d cmdStat, ops int64) *ServerTime {
	t := &ServerTime{Calls: d.calls, Usec: d.usec}
	if d.calls > 0 {
		t.UsPerCall = float64(d.usec) / float64(d.calls)
	}
	if ops > 0 {
		t.UsPerOp = float64(d.usec) / float64(ops)
		t.CallsPerOp = float64(d.calls) / float64(ops)
	}
	return t
}

// window measures a real server's script time between two points.
type window struct {
	srv   *Server
	start cmdStat
	ok    bool
}

func (s *Server) openWindow(ctx context.Context) *window {
	w := &window{srv: s}
	w.start, w.ok = s.scriptTime(ctx)
	return w
}

// close returns the script time since the window opened, per operation
// of ops; nil on miniredis.
func (w *window) close(ctx context.Context, ops int64) *ServerTime {
	if !w.ok {
		return nil
	}
	end, ok := w.srv.scriptTime(ctx)
	if !ok {
		return nil
	}
	return serverTime(end.sub(w.start), ops)
}

// CPU returns the CPU time (user and system) a real server has used so
// far (INFO cpu); ok is false on miniredis or when INFO fails.
func (s *Server) CPU(ctx context.Context) (d time.Duration, ok bool) {
	if !s.Real() {
		return 0, false
	}
	c := redis.NewClient(s.Options())
	defer c.Close()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, false
	}
	return parseCPU(info)
}

// parseCPU reads used_cpu_user + used_cpu_sys (the server process's CPU
// time so far) from INFO.
func parseCPU(info string) (d time.Duration, ok bool) {
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		name, v, found := strings.Cut(strings.TrimSpace(line), ":")
		if found && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, false
			}
			sum += f
			ok = true
		}
	}
	return time.Duration(sum * float64(time.Second)), ok
}

// cpuMeter measures the CPU time this process and a real server use
// between two points.
type cpuMeter struct {
	srv                *Server
	client, server     time.Duration
	clientOK, serverOK bool
}

func (s *Server) startCPU(ctx context.Context) *cpuMeter {
	m := &cpuMeter{srv: s}
	m.server, m.serverOK = s.CPU(ctx)
	m.client, _, m.clientOK = processUsage()
	return m
}

// stop returns the CPU time used since start by this process and by the
// server (0 when unknown; on miniredis the server runs in this process).
func (m *cpuMeter) stop(ctx context.Context) (client, server time.Duration) {
	if c, _, ok := processUsage(); ok && m.clientOK {
		client = c - m.client
	}
	if s, ok := m.srv.CPU(ctx); ok && m.serverOK {
		server = s - m.server
	}
	return client, server
}

// UniqueName returns a lock name that no other run uses.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "relockbench." + prefix + "." + hex.EncodeToString(b[:])
}

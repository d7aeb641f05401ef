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
	s.version = "redis"
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				s.version = "redis " + v
			}
		}
	}
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
	if !s.Real() {
		return 0, false
	}
	c := redis.NewClient(s.Options())
	defer c.Close()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, found := strings.Cut(strings.TrimSpace(line), ":")
		switch name {
		case "cmdstat_subscribe", "cmdstat_unsubscribe", "cmdstat_psubscribe",
			"cmdstat_punsubscribe", "cmdstat_ssubscribe", "cmdstat_sunsubscribe":
		default:
			continue
		}
		if !found {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, isCalls := strings.CutPrefix(f, "calls="); isCalls {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n, true
}

// UniqueName returns a lock name that no other run uses.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "relockbench." + prefix + "." + hex.EncodeToString(b[:])
}

package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/redlock"
)

// MultiKind makes a kind that locks over several independent masters
// (Redlock) on masters: one server per master, given by -redlock.
type MultiKind func(masters []*Server) Kind

// multiKinds make the multi-master kinds; the peers command adds its own
// with RegisterMultiKind.
var multiKinds = []MultiKind{RedlockKind}

// RegisterMultiKind adds a multi-master kind, measured on 3 and 5 of the
// -redlock masters.
func RegisterMultiKind(f MultiKind) { multiKinds = append(multiKinds, f) }

// MultiMasterSizes are the numbers of masters the multi-master kinds are
// measured on (those that -redlock gives enough servers for).
var MultiMasterSizes = []int{3, 5}

// multiScenarios are the scenarios a multi-master kind runs.
var multiScenarios = []string{ScenarioUncontended, ScenarioHandoff}

// KindRedlock is relock's redlock package over n masters.
func KindRedlock(n int) string { return fmt.Sprintf("relock/redlock-%d", n) }

// RedlockKind is relock's redlock.Mutex over masters, each reached by a
// relock.Client of its own go-redis client, with defaults (the masters'
// watchdogs keep held locks alive, every master pushes wake-ups).
func RedlockKind(masters []*Server) Kind {
	return Kind{
		Name:    KindRedlock(len(masters)),
		Masters: len(masters),
		Renews:  true,
		Note:    fmt.Sprintf("redlock over %d masters, defaults (watchdog, pub/sub wake-ups from every master)", len(masters)),
		Open: func(_ *Server, cnt *Counter, o OpenOptions) (Conn, error) {
			var opts []relock.Option
			if o.WatchdogTimeout > 0 {
				opts = append(opts, relock.WithWatchdogTimeout(o.WatchdogTimeout))
			}
			c := &redlockConn{}
			for _, m := range masters {
				rdb := m.NewRedis(cnt)
				rc := relock.New(rdb, opts...)
				c.rdbs, c.clients = append(c.rdbs, rdb), append(c.clients, rc)
				if err := rc.Err(); err != nil {
					_ = c.Close()
					return nil, err
				}
			}
			return c, nil
		},
	}
}

type redlockConn struct {
	rdbs    []*redis.Client
	clients []*relock.Client
}

func (c *redlockConn) New(name string) Locker { return redlock.New(c.clients, name) }

func (c *redlockConn) Close() error {
	var err error
	for i := range c.clients {
		if cerr := c.clients[i].Close(); err == nil {
			err = cerr
		}
		if cerr := c.rdbs[i].Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// dialMasters connects to the comma-separated -redlock servers (URLs, or
// host:port for redis://host:port, which keeps the report's command line
// within its width): at least 3 distinct servers.
func dialMasters(list string) ([]*Server, error) {
	urls := splitList(list)
	for i, u := range urls {
		if !strings.Contains(u, "://") {
			urls[i] = "redis://" + u
		}
	}
	if len(urls) < MultiMasterSizes[0] {
		return nil, fmt.Errorf("-redlock needs at least %d URLs, got %d", MultiMasterSizes[0], len(urls))
	}
	var out []*Server
	for _, u := range urls {
		s, err := Dial(u)
		if err != nil {
			return nil, fmt.Errorf("-redlock: %w", err)
		}
		if slices.ContainsFunc(out, func(o *Server) bool { return o.Addr() == s.Addr() }) {
			return nil, fmt.Errorf("-redlock: %s given twice: the masters must be independent servers", s.Addr())
		}
		out = append(out, s)
	}
	return out, nil
}

// multiMasterKinds returns every multi-master kind on the first n masters,
// for each n of MultiMasterSizes that there are masters for.
func multiMasterKinds(masters []*Server) []Kind {
	var out []Kind
	for _, n := range MultiMasterSizes {
		if n > len(masters) {
			break
		}
		for _, f := range multiKinds {
			out = append(out, f(masters[:n]))
		}
	}
	return out
}

// describeMasters names the masters for the report.
func describeMasters(masters []*Server) string {
	var addrs []string
	for _, m := range masters {
		addrs = append(addrs, m.Addr())
	}
	return strings.Join(addrs, ", ")
}

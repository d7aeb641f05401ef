package redistest

import (
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Options returns the go-redis options of a client of s as its test user:
// its address, its TLS configuration (a copy) and its credentials, if any.
func (s *Server) Options() *redis.Options {
	o := s.adminOptions()
	o.Username, o.Password = s.Username, s.Password
	if s.Username != "" {
		// go-redis then sends CLIENT SETNAME on every new connection: the
		// restricted user shows that its rules allow it.
		o.ClientName = "relock-test"
	}
	return o
}

// adminOptions are the options of a client of s as the default user.
func (s *Server) adminOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr}
	if s.TLS != nil {
		o.TLSConfig = s.TLS.Clone()
	}
	return o
}

// Admin returns a go-redis client on the server as its default,
// unrestricted user (Client's, unless s has credentials), closed at the
// end of t: for a test's own checks and set-up, which a restricted user
// may not be allowed.
func (s *Server) Admin(t testing.TB) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if s.Cluster != nil {
		c = redis.NewClusterClient(clusterOptions(s.Cluster, s.adminOptions()))
	} else {
		c = redis.NewClient(s.adminOptions())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// scopes maps the name of a test inside RunOn to the server its Run and
// RunReal calls use.
var scopes sync.Map // string -> *Server

// RunOn runs f with every Run and RunReal inside it (called by f or by a
// subtest of f) running only on s, as one subtest named label: shared
// tests written for Run (package locktest) then run unchanged on a server
// of a special kind, such as a restricted ACL user (RunACL) or a TLS-only
// server (StartTLSServer).
func RunOn(t *testing.T, s *Server, label string, f func(t *testing.T)) {
	t.Helper()
	c := *s
	c.label = label
	name := t.Name()
	scopes.Store(name, &c)
	t.Cleanup(func() { scopes.Delete(name) }) // after parallel subtests too
	f(t)
}

// scoped returns the server of the innermost RunOn around t, or nil.
func scoped(t testing.TB) *Server {
	name := t.Name()
	for {
		if s, ok := scopes.Load(name); ok {
			return s.(*Server)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

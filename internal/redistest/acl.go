package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACLUser is the name of the restricted user of RunACL, as in docs/operations.md.
const ACLUser = "relock"

// ACLRules are the ACL rules of a Redis user that can use everything relock
// does (every lock type, waits, the watchdog, fencing, WithSyncReplicas,
// queries and force-unlock) and nothing else: relock's keys and channels
// (relock:<kind>:{name}..., including a fair waiter's own channel), and
// exactly the commands relock sends and those its scripts call.
//
//   - sent by relock: EVALSHA, and EVAL when the server answers NOSCRIPT;
//     SET (a mutex's first attempt, SET NX PX); GET, EXISTS, PTTL, HGET
//     (queries); WAIT (WithSyncReplicas); SUBSCRIBE, UNSUBSCRIBE and PING
//     on the pub/sub connection;
//   - sent by go-redis when it opens a connection: CLIENT SETNAME (with
//     Options.ClientName), SELECT (with Options.DB > 0); HELLO and AUTH
//     need no rule; CLIENT SETINFO (Redis 7.2+; go-redis ignores its
//     refusal) is left out, as Redis 7.0 rejects the rule;
//   - called by the scripts (internal/scripts/*.lua): the rest.
//
// docs/operations.md's "ACL" section shows them in one ACL SETUSER line, which
// TestACLLine (package relock) checks against ACLLine.
const ACLRules = "resetkeys ~relock:* resetchannels &relock:* -@all " +
	"+evalsha +eval +fcall +function|load +set +get +exists +pttl +hget +wait +subscribe +unsubscribe +ping " +
	"+client|setname +select " +
	"+del +rename +incr +decr +pexpire +hset +hdel +hexists +hincrby +hmget " +
	"+zadd +zrem +zcard +zscore +zrange +zrangebyscore +zremrangebyscore +publish +time +hgetall"

// ACLClusterRules are the rules that a user needs beyond ACLRules on a
// Redis Cluster, through go-redis's ClusterClient: its view of the
// cluster (CLUSTER SLOTS), the server's command table (COMMAND, which
// newer go-redis sends to route by command policy: v9.23.0 does, and
// without the rule asks again, refused, hundreds of times a second;
// v9.7.3 does not), following a slot in migration (ASKING, which go-redis
// sends before a command an ASK reply redirected) and sharded wake-ups
// (the scripts' SPUBLISH, the Client's SSUBSCRIBE and SUNSUBSCRIBE).
// go-redis sends COMMAND bare, so +command|info does not cover it, and
// Redis 7.0 has no rule for the bare container alone: +command allows its
// subcommands too (COMMAND COUNT, DOCS, GETKEYS, INFO, LIST...), all of
// which only describe the command table. Every node needs the user: Redis
// does not spread ACLs over a cluster. docs/operations.md gives them as
// "ACL SETUSER relock " + ACLClusterRules.
const ACLClusterRules = "+cluster|slots +command +asking +spublish +ssubscribe +sunsubscribe"

// ACLOperatorRules are the rules that the relock command (cmd/relock)
// needs beyond ACLRules: SCAN (list). (HGETALL, with which inspect's
// scripts and the handles' Holders read whole hashes, is in ACLRules.)
// docs/operations.md gives them as "ACL SETUSER relock " + ACLOperatorRules.
const ACLOperatorRules = "+scan"

// ACLLine is the ACL SETUSER command that creates (or resets the rules
// of) user with password and ACLRules, as docs/operations.md writes it.
func ACLLine(user, password string) string {
	return "ACL SETUSER " + user + " on >" + password + " " + ACLRules
}

var (
	aclOnce, aclClusterOnce sync.Once
	aclSrv, aclClusterSrv   *Server
	aclErr, aclClusterErr   error
)

// ACL returns the package's real redis-server as ACLUser, a user with
// exactly ACLRules (created once per test binary); like Real, it skips t,
// or fails it with RELOCK_REQUIRE_REDIS=1, without a server.
func ACL(t testing.TB) *Server {
	t.Helper()
	r := Real(t)
	aclOnce.Do(func() {
		pw := newPassword()
		if aclErr = SetUser(context.Background(), r, ACLLine(ACLUser, pw)); aclErr == nil {
			aclSrv = &Server{Addr: r.Addr, Username: ACLUser, Password: pw}
		}
	})
	if aclErr != nil {
		t.Fatalf("create the ACL user: %v", aclErr)
	}
	return aclSrv
}

// ACLCluster returns the test binary's cluster (RealCluster) as ACLUser,
// with exactly ACLRules and ACLClusterRules on every node (created once
// per test binary).
func ACLCluster(t testing.TB) *Server {
	t.Helper()
	c := RealCluster(t)
	aclClusterOnce.Do(func() { aclClusterSrv, aclClusterErr = restrict(c) })
	if aclClusterErr != nil {
		t.Fatalf("create the ACL user on the cluster: %v", aclClusterErr)
	}
	return aclClusterSrv
}

// ACLOn creates ACLUser, with exactly ACLRules and ACLClusterRules, on
// every node of c (a cluster of t's own: StartCluster) and returns c as
// that user, for Client and NewClient; Admin and Keys stay unrestricted.
// At the end of t it fails t if a node refused the user anything.
func ACLOn(t *testing.T, c *Cluster) *Server {
	t.Helper()
	s, err := restrict(c)
	if err != nil {
		t.Fatalf("create the ACL user on the cluster: %v", err)
	}
	for _, n := range c.Nodes {
		checkACLLog(t, &n.Server)
	}
	return s
}

// restrict creates ACLUser with ACLRules and ACLClusterRules on every node
// of c, and returns c as that user.
func restrict(c *Cluster) (*Server, error) {
	pw := newPassword()
	for _, n := range c.Nodes {
		if err := SetUser(context.Background(), &n.Server, ACLLine(ACLUser, pw)+" "+ACLClusterRules); err != nil {
			return nil, err
		}
	}
	return &Server{Addr: c.Nodes[0].Addr, Cluster: c, Username: ACLUser, Password: pw}, nil
}

func newPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SetUser runs line, an "ACL SETUSER user rules..." command, on s as its
// default user.
func SetUser(ctx context.Context, s *Server, line string) error {
	c := redis.NewClient(s.adminOptions())
	defer c.Close()
	args := []any{}
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	return c.Do(ctx, args...).Err()
}

// NewUser creates a user of t's own on the real server s with password
// "pw" and the given rules (ACL SETUSER syntax), deletes it at the end of
// t, and returns s as that user.
func NewUser(t testing.TB, s *Server, rules string) *Server {
	t.Helper()
	user := "u-" + strings.NewReplacer("/", "-", ".", "-").Replace(Name(t))
	if err := SetUser(context.Background(), s, "ACL SETUSER "+user+" reset on >pw "+rules); err != nil {
		t.Fatalf("create user %s: %v", user, err)
	}
	t.Cleanup(func() {
		c := redis.NewClient(s.adminOptions())
		defer c.Close()
		_ = c.Do(context.Background(), "ACL", "DELUSER", user).Err()
	})
	u := *s
	u.Username, u.Password = user, "pw"
	return &u
}

// RunACL runs f with every Run and RunReal inside it (see RunOn) running
// on the real redis-server only, with clients (Server.Client,
// NewClient) that connect as ACLUser, whose rights are exactly ACLRules;
// Server.Keys and Server.Admin stay unrestricted for the tests' own checks.
// In a binary whose Run also covers the cluster (MainCluster), f runs a
// second time, as subtest "cluster", on the cluster as ACLUser with
// ACLRules and ACLClusterRules. At the end it fails t if a server refused
// ACLUser anything (its ACL LOG): whatever relock or a shared test sent
// was within the rules, even a refusal that the library swallowed.
func RunACL(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	s := ACL(t)
	checkACLLog(t, s)
	RunOn(t, s, "redis-acl", f)
	if onCluster && !testing.Short() {
		Subtest(t, "cluster", func(t *testing.T) {
			cs := ACLCluster(t)
			for _, n := range cs.Cluster.Nodes {
				checkACLLog(t, &n.Server)
			}
			RunOn(t, cs, "cluster-acl", f)
		})
	}
}

// checkACLLog fails t, at its end, if the server s refused ACLUser
// anything (its ACL LOG, which it then resets: each refusal is reported
// once).
func checkACLLog(t *testing.T, s *Server) {
	t.Cleanup(func() {
		ctx := context.Background()
		admin := redis.NewClient(s.adminOptions())
		defer admin.Close()
		log, err := admin.ACLLog(ctx, 0).Result()
		if err != nil {
			t.Errorf("ACL LOG of %s: %v", s.Addr, err)
			return
		}
		var refused []string
		for _, e := range log {
			if e.Username == ACLUser {
				refused = append(refused, fmt.Sprintf("%s %q (%s, %d times)", e.Reason, e.Object, e.Context, e.Count))
			}
		}
		if len(refused) > 0 {
			t.Errorf("%s refused the ACL user %s: %s", s.Addr, ACLUser, strings.Join(refused, "; "))
			_ = admin.ACLLogReset(ctx).Err()
		}
	})
}

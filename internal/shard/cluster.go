package shard

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refresh asks a Cluster client to reload its view of the cluster after
// err, when err is no reply from Redis but a node out of reach (refused,
// reset, timed out): the node may have died and its replica taken over,
// which go-redis learns by itself only from a MOVED reply or its periodic
// reload (every 10 s). It does so too after a MOVED or ASK reply: go-redis
// follows those itself for the commands it routes, but not for those sent
// on one node's connection (WithSyncReplicas's pinned acquires and synced
// renewals), which would go on asking a node that no longer serves the
// slot. The reload runs in the background, at most one at a time
// (go-redis's LazyReload). Other clients and errors: nothing.
func Refresh(rdb redis.UniversalClient, err error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if rerr := redis.Error(nil); errors.As(err, &rerr) && !redirected(err) {
		return // a reply: the node is there, and serves the slot
	}
	cc.ReloadState(context.Background())
}

// redirected reports whether err is a MOVED or ASK reply: the node that
// answered does not serve the slot (any more, or not for this key).
func redirected(err error) bool {
	var rerr redis.Error
	return Moving(err) && errors.As(err, &rerr) && !strings.HasPrefix(rerr.Error(), "TRYAGAIN ")
}

// Moving reports whether err is a Redis Cluster's refusal of a command
// because the slot of its keys is moving or has just moved to another
// master: TRYAGAIN (a command on several keys, some of them already at
// the destination or missing there), ASK or MOVED (the client's view is
// behind). Redis did not run the command that got this reply; but go-redis
// returns the last reply of its own tries (MaxRedirects, 3 by default), and
// an earlier try whose reply was lost may have run: once a caller stops
// sending it again, the outcome is unknown.
func Moving(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "TRYAGAIN ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "MOVED ")
}

// Unsettled reports whether err is a refusal of a moving slot (Moving) to
// rdb, a Cluster client, which may route the command elsewhere when it is
// sent again; sent again once the slot has settled, it succeeds. A lock
// script declares several keys, some of which usually do not exist (a
// queue, a record): while its slot migrates, from CLUSTER SETSLOT
// IMPORTING to SETSLOT NODE, it is refused at both masters. go-redis
// follows such replies only MaxRedirects times within a few milliseconds.
func Unsettled(rdb redis.UniversalClient, err error) bool {
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		return false // a single node's client cannot follow a redirect
	}
	return Moving(err)
}

// Unreached reports whether err says that rdb, a Cluster client, could
// not connect to the node it picked (the dial failed: the command was not
// sent), as happens after a master died and before the client's view
// names its replica: sent again once the view is reloaded (Refresh), the
// command reaches the new master.
func Unreached(rdb redis.UniversalClient, err error) bool {
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// MaxUnsettled bounds how long a command that Unsettled refuses is sent
// again: most slots migrate far faster, and a cluster whose nodes keep
// disagreeing on a slot must not hang a call whose ctx has no deadline.
const MaxUnsettled = 10 * time.Second

// errUnsettled is Pause's answer after MaxUnsettled.
var errUnsettled = errors.New("shard: slot still moving")

// Pause waits before the next try of a command that Unsettled refused
// after tries tries (1, 2, ...) since first (the first try's start): 10,
// 20, 40, 80 ms, then 250 ms, each less a random part of up to half (so
// that refused clients do not all send again at once). It returns ctx's
// error if ctx ends first, and an error without waiting once MaxUnsettled
// has passed since first.
func Pause(ctx context.Context, tries int, first time.Time) error {
	if time.Since(first) >= MaxUnsettled {
		return errUnsettled
	}
	t := time.NewTimer(Backoff(tries))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is Pause's wait after tries tries (1, 2, ...).
func Backoff(tries int) time.Duration {
	d := 250 * time.Millisecond
	if tries < 5 {
		d = 10 * time.Millisecond << (max(tries, 1) - 1)
	}
	return d - rand.N(d/2)
}

// ErrNoNode is what Node returns for a client that does not let a caller
// pick the one server of a key (a Ring).
var ErrNoNode = errors.New("shard: no single node to pin for this client")

// Node returns the client of the one server that serves key: rdb itself
// for a single server, the master of key's slot on a Cluster (from the
// client's view of the cluster, which it may have to load first), so
// that commands that must share a connection with a key's writes (WAIT
// after a script) can be sent there.
func Node(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, ErrNoNode
}

package shard

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refresh asks a Cluster client to reload its view of the cluster after
// err, when err is no reply from Redis but a node out of reach (refused,
// reset, timed out): the node may have died and its replica taken over,
// which go-redis learns by itself only from a MOVED reply or its periodic
// reload (every 10 s). The reload runs in the background, at most one at
// a time (go-redis's LazyReload). Other clients and errors: nothing.
func Refresh(rdb redis.UniversalClient, err error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if rerr := redis.Error(nil); errors.As(err, &rerr) {
		return // a reply: the node is there
	}
	cc.ReloadState(context.Background())
}

// Unsettled reports whether err is a Redis Cluster's refusal of a command
// because the slot of its keys is moving or has just moved to another
// master (TRYAGAIN: some of the keys are already at the destination;
// ASK, MOVED: the client's view is behind), as a reply to rdb, a Cluster
// client. Redis did not run the command: sending it again is safe, and
// succeeds once the slot has settled. go-redis follows such replies only
// MaxRedirects times (3 by default) within a few milliseconds, which a
// slot resharded key by key, or moved twice in a row, outlasts.
func Unsettled(rdb redis.UniversalClient, err error) bool {
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		return false // a single node's client cannot follow a redirect
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "TRYAGAIN ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "MOVED ")
}

// MaxUnsettledTries bounds the tries of a command that Unsettled refuses
// (about 10 s of Pause): a slot's migration lasts far less, and a cluster
// whose nodes keep disagreeing on a slot must not hang a call whose ctx
// has no deadline.
const MaxUnsettledTries = 45

// errUnsettled is Pause's answer after MaxUnsettledTries.
var errUnsettled = errors.New("shard: slot still moving")

// Pause waits before the next try of a command that Unsettled refused
// after tries tries (1, 2, ...): 10 ms doubling up to 250 ms. It returns
// ctx's error if ctx ends first, and an error without waiting once tries
// reaches MaxUnsettledTries.
func Pause(ctx context.Context, tries int) error {
	if tries >= MaxUnsettledTries {
		return errUnsettled
	}
	d := 250 * time.Millisecond
	if tries < 5 {
		d = 10 * time.Millisecond << (tries - 1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

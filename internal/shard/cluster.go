package shard

import (
	"context"
	"errors"

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

package shard

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Pipeliner is a go-redis client that pipelines.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// clusterFanout is how many commands Pipelined has on the way at once on
// a Cluster.
const clusterFanout = 16

// Pipelined sends the commands that queue queues and returns (as
// go-redis's Pipelined does) the first error among their replies (a
// script call left without reply or error by a pipeline that failed gets
// its error: see failUnanswered): in one pipeline, except on a
// ClusterClient, where each command goes in a pipeline of its own,
// clusterFanout at a time (so that the client's pipeline hooks still see
// them).
//
// go-redis's cluster pipelines (v9.7 to v9.23 at least) may send one
// command twice at once while a slot migrates: when the first command of
// a node's part is refused with a retryable error (TRYAGAIN, which a
// multi-key command gets while its slot is half moved), the whole part is
// queued again, including the commands already queued for the node that a
// MOVED or ASK named, and both copies are then read into the same
// command from two goroutines (a data race, and a script run twice). A
// pipeline of one command is redirected as a single command is. queue
// must return the commands it queued, in order.
func Pipelined(ctx context.Context, rdb Pipeliner, queue func(p redis.Pipeliner) []redis.Cmder) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		var cmds []redis.Cmder
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmds = queue(p)
			return nil
		})
		if err != nil {
			failUnanswered(cmds, err)
		}
		return err
	}
	p := cc.Pipeline()
	cmds := queue(p)
	p.Discard()
	var wg sync.WaitGroup
	slots := make(chan struct{}, clusterFanout)
	for _, cmd := range cmds {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Process(ctx, cmd) }); err != nil {
				failUnanswered([]redis.Cmder{cmd}, err)
			}
			<-slots
		}()
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// failUnanswered gives err to the script calls (*redis.Cmd) of a failed
// pipeline that have neither an error nor a reply: go-redis 9.7 leaves
// them so when the pipeline never reached a connection (a refused dial),
// and reading them would say "unexpected type=<nil>" instead of why.
func failUnanswered(cmds []redis.Cmder, err error) {
	for _, c := range cmds {
		if cmd, ok := c.(*redis.Cmd); ok && cmd.Err() == nil && cmd.Val() == nil {
			cmd.SetErr(err)
		}
	}
}

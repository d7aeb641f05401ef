package core

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/shard"
)

// Sweeper deletes the request records of requests that are done.
//
// The lock types' scripts keep a record of each request that must not be
// applied twice (a final release, an acquire with fencing, a re-entry):
// a resend of a request whose reply was lost finds it and answers as the
// first run did. Once the handle has the reply of a request it sent once,
// within the client's read timeout, nothing can resend that request: the
// handle does not, and go-redis retries a command only after an error
// (a copy of a command that timed out may still reach Redis later). The
// handle then hands the record's key to the Sweeper, which deletes it
// within SweepInterval, with one DEL of every record due per Cluster slot
// (and at Close). So an uncontended cycle leaves no key behind. A record
// whose reply was lost, or came after the read timeout, or whose request
// was sent again, is left to its TTL (see Request.RecordTTL), as are the
// abort marks (a late copy of an aborted acquire must find its mark).
//
// When Redis is unreachable the deletes fail, and the records expire by
// themselves; the Sweeper does not retry.
type Sweeper struct {
	rdb  redis.UniversalClient
	late time.Duration // replies after this may have been retried by go-redis

	mu     sync.Mutex
	keys   []string
	timer  *time.Timer // armed while keys wait
	closed bool
	wg     sync.WaitGroup // sweeps in flight
}

// SweepInterval is how long a done request's record waits to be deleted
// (with those of the requests done meanwhile).
const SweepInterval = 100 * time.Millisecond

// sweepBatch is the most keys one DEL deletes; sweepTimeout bounds a
// sweep's commands.
const (
	sweepBatch   = 512
	sweepTimeout = 5 * time.Second
)

// NewSweeper returns the Sweeper of rdb's request records.
func NewSweeper(rdb redis.UniversalClient) *Sweeper {
	return &Sweeper{rdb: rdb, late: readTimeout(rdb)}
}

// readTimeout is rdb's read timeout, after which go-redis may send a
// command again (its default, 3 s, when the options say 0); no timeout
// (-1, -2): an hour, as a reply is then never retried for a timeout; a
// client of another type, whose timeout is unknown: 0, so that nothing
// is swept (its records expire by themselves).
func readTimeout(rdb redis.UniversalClient) time.Duration {
	var d time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		d = c.Options().ReadTimeout
	case *redis.ClusterClient:
		d = c.Options().ReadTimeout
	case *redis.Ring:
		d = c.Options().ReadTimeout
	default:
		return 0
	}
	switch {
	case d == 0:
		return 3 * time.Second
	case d < 0:
		return time.Hour
	}
	return d
}

// Done hands over the record key of a request that was sent once, at
// sent, and whose reply has come: it is deleted within SweepInterval,
// unless the reply came too late to rule out a copy (see Sweeper).
func (s *Sweeper) Done(key string, sent time.Time) {
	if time.Since(sent) >= s.late {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.keys = append(s.keys, key)
	if s.timer == nil {
		s.wg.Add(1)
		s.timer = time.AfterFunc(SweepInterval, s.sweep)
	}
}

// sweep deletes the keys due.
func (s *Sweeper) sweep() {
	defer s.wg.Done()
	s.mu.Lock()
	keys := s.keys
	s.keys, s.timer = nil, nil
	s.mu.Unlock()
	s.delete(keys)
}

// Close deletes the keys due now, and waits for a sweep in flight.
func (s *Sweeper) Close() {
	s.mu.Lock()
	s.closed = true
	keys := s.keys
	s.keys = nil
	if s.timer != nil && s.timer.Stop() {
		s.wg.Done()
	}
	s.timer = nil
	s.mu.Unlock()
	s.delete(keys)
	s.wg.Wait()
}

// delete deletes keys, in DELs of at most sweepBatch keys of one slot (a
// Cluster refuses a DEL across slots; a Ring routes a command by its
// first key: there, one DEL per key), all in one pipeline. Errors are
// dropped: the keys expire anyway.
func (s *Sweeper) delete(keys []string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	var groups [][]string
	switch s.rdb.(type) {
	case *redis.ClusterClient:
		bySlot := map[int][]string{}
		for _, k := range keys {
			slot := shard.Slot(k)
			bySlot[slot] = append(bySlot[slot], k)
		}
		for _, g := range bySlot {
			groups = append(groups, g)
		}
	case *redis.Ring:
		for _, k := range keys {
			groups = append(groups, []string{k})
		}
	default:
		groups = [][]string{keys}
	}
	_ = shard.Pipelined(ctx, s.rdb, func(p redis.Pipeliner) []redis.Cmder {
		var cmds []redis.Cmder
		for _, g := range groups {
			for len(g) > 0 {
				n := min(len(g), sweepBatch)
				cmds = append(cmds, p.Del(ctx, g[:n]...))
				g = g[n:]
			}
		}
		return cmds
	})
}

// IsSweep reports whether cmd is a Sweeper's DEL of request records (keys
// "<lock>:r:..." after the lock's hash tag), for counters that tell a
// Client's background work from the commands of its calls.
func IsSweep(cmd redis.Cmder) bool {
	args := cmd.Args()
	if !strings.EqualFold(cmd.Name(), "del") || len(args) < 2 {
		return false
	}
	for _, a := range args[1:] {
		if k, ok := a.(string); !ok || !strings.Contains(k, "}:r:") {
			return false
		}
	}
	return true
}

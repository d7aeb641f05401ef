package election

import (
	"context"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// protocol is what a handle sends to Redis: the leadership is one unit of
// class core.Units, and the hold state machine (the watchdog hold, grants
// pushed to a waiting candidate, lost replies) is core.Holder's.
type protocol struct {
	o      *core.Owner
	keys   []string // leadership, term counter, record, queue, deadlines, values, log
	prefix string   // of the candidates' own channels
	// value is the fingerprint and value of the campaign in progress: set
	// by Campaign before it waits (one Campaign at a time), read by its
	// attempts, in the same goroutine.
	value string
}

func newProtocol(o *core.Owner) *protocol {
	k := o.Keys
	return &protocol{
		o:      o,
		keys:   []string{k.Lock, k.Fence, k.Record(o.Token), k.Queue, k.Timeouts, k.Sub("values"), k.Sub("log")},
		prefix: k.WaitPrefix(),
	}
}

// logTTL is how long the log lives after a change made by this handle:
// its lease, or its heartbeat if longer (as long as its queue entry).
func (p *protocol) logTTL() int64 { return max(p.o.Lease(), p.o.Heartbeat()).Milliseconds() }

// Refuse: the leader campaigns again (a leadership is not reentrant).
func (p *protocol) Refuse(r *core.Request) error {
	if r.Held[core.Units] > 0 {
		return lockerr.AlreadyHeld
	}
	return nil
}

// Grants: a resignation makes the head of the queue the leader.
func (p *protocol) Grants() bool { return true }

// Records: the election keeps one record per owner (election_common.lua).
func (p *protocol) Records() bool { return false }

func (p *protocol) Acquire(ctx context.Context, r *core.Request) ([]int64, error) {
	o := p.o
	return o.Run(ctx, scripts.ElectionCampaign, p.keys, o.Token, r.Lease.Milliseconds(), r.ID, r.RecordTTL(),
		o.Heartbeat().Milliseconds(), r.WaitID(), r.Claim.Milliseconds(), p.prefix, o.Keys.Channel,
		p.logTTL(), p.value).Int64Slice()
}

func (p *protocol) Release(ctx context.Context, r *core.Request) (int64, error) {
	o := p.o
	return o.Run(ctx, scripts.ElectionResign, p.keys, o.Token, r.ID, r.RecordTTL(), p.prefix,
		o.Keys.Channel, p.logTTL()).Int64()
}

func (p *protocol) Abort(ctx context.Context, r *core.Request) error {
	o := p.o
	giveBack := "0"
	if r.GiveBack {
		giveBack = "1"
	}
	return o.Run(ctx, scripts.ElectionAbort, p.keys, o.Token, r.ID, r.RecordTTL(), p.prefix,
		o.Keys.Channel, p.logTTL(), giveBack).Err()
}

func (p *protocol) Leave(ctx context.Context, r *core.Request) error {
	o := p.o
	return o.Run(ctx, scripts.ElectionLeave, p.keys, o.Token, r.WaitID(), r.Held[core.Units], p.prefix,
		r.Claim.Milliseconds(), o.Keys.Channel, p.logTTL()).Err()
}

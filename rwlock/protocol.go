package rwlock

import (
	"context"
	"fmt"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
)

// protocol is what a handle sends to Redis: read holds are units of class
// core.Read, write holds of class core.Write, and the handle's own counts
// of both decide what a release means ("this handle keeps nothing" drops
// all of its holds). The hold state machine is core.Holder's.
type protocol struct {
	o      *core.Owner
	keys   []string // the lock: the scripts build its other keys (see scripts.deriving)
	owners string   // the owners' expiries (see rwlock_common.lua)
}

func newProtocol(o *core.Owner) *protocol {
	k := o.Keys
	return &protocol{o: o, keys: []string{k.Lock}, owners: k.Sub("owners")}
}

// kindOf is how the scripts spell a class.
func kindOf(c core.Class) string {
	if c == core.Write {
		return "w"
	}
	return "r"
}

func (p *protocol) fencing() int {
	if p.o.Cfg.Fencing {
		return 1
	}
	return 0
}

func (p *protocol) Refuse(r *core.Request) error {
	if r.Class == core.Write && r.Held[core.Read] > 0 && r.Held[core.Write] == 0 {
		return fmt.Errorf("%w: this handle holds read holds only", lockerr.Upgrade)
	}
	return nil
}

// Grants: a write lock is granted to a waiting writer (readers are woken,
// not granted).
func (p *protocol) Grants() bool { return true }

func (p *protocol) Records() bool { return true }

func (p *protocol) Acquire(ctx context.Context, r *core.Request) ([]int64, error) {
	o := p.o
	wait := ""
	if r.Block && r.Class == core.Write {
		wait = r.WaitID() // only writers queue
	}
	return o.Run(ctx, scripts.RWAcquire, p.keys, append([]any{o.Token, r.Lease.Milliseconds(), r.ID,
		r.Held[core.Read], r.Held[core.Write], p.fencing(), kindOf(r.Class),
		r.WaitArgs(o.Heartbeat(), wait)}, o.Metadata()...)...).Int64Slice()
}

func (p *protocol) Release(ctx context.Context, r *core.Request) (int64, error) {
	o := p.o
	left := r.Left()
	return o.Run(ctx, scripts.RWRelease, p.keys, o.Token, r.ID, kindOf(r.Class), left[core.Read], left[core.Write],
		r.Lease.Milliseconds(), r.RecordTTL(), r.KeptRecord()).Int64()
}

func (p *protocol) Abort(ctx context.Context, r *core.Request) error {
	o := p.o
	// A hold the abort could not undo expires within a lease (the
	// handle's next acquire from zero holds also drops it).
	return o.Run(ctx, scripts.RWAbort, p.keys, o.Token, r.ID, r.RecordTTL(),
		kindOf(r.Class), r.Held[core.Read], r.Held[core.Write]).Err()
}

func (p *protocol) Leave(ctx context.Context, r *core.Request) error {
	if r.Class != core.Write {
		return nil // readers do not queue
	}
	o := p.o
	return o.Run(ctx, scripts.RWLeave, p.keys, o.Token, r.WaitID(), r.Held[core.Read], r.Held[core.Write],
		r.Claim.Milliseconds(), p.fencing(), o.Cfg.Metadata).Err()
}

func (l *RWMutex) counts(ctx context.Context) (r, w int, err error) {
	if err := l.h.Check(); err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	res, err := l.h.RunShared(ctx, scripts.RWCount, []string{l.h.Keys.Lock, l.p.owners}, l.h.Token).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	return int(res[0]), int(res[1]), nil
}

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
// all of its fields). The hold state machine is core.Holder's.
type protocol struct {
	o  *core.Owner
	wq string // waiting writers
}

// kindOf is how the scripts spell a class.
func kindOf(c core.Class) string {
	if c == core.Write {
		return "w"
	}
	return "r"
}

func (p *protocol) Refuse(r *core.Request) error {
	if r.Class == core.Write && r.Held[core.Read] > 0 && r.Held[core.Write] == 0 {
		return fmt.Errorf("%w: this handle holds read holds only", lockerr.Upgrade)
	}
	return nil
}

func (p *protocol) Acquire(ctx context.Context, r *core.Request) ([]int64, error) {
	o := p.o
	keys := []string{o.Keys.Lock, o.Keys.Fence, o.Keys.Record(o.Token), p.wq}
	fencing, blocking := 0, 0
	if o.Cfg.Fencing {
		fencing = 1
	}
	if r.Block {
		blocking = 1
	}
	return o.Run(ctx, scripts.RWAcquire, keys, o.Token, o.Lease().Milliseconds(), r.ID,
		r.Held[core.Read], r.Held[core.Write], fencing, o.RecordTTL(),
		kindOf(r.Class), blocking, WriterHeartbeat.Milliseconds()).Int64Slice()
}

func (p *protocol) Release(ctx context.Context, r *core.Request) (int64, error) {
	o := p.o
	left := r.Left()
	keys := []string{o.Keys.Lock, o.Keys.Record(o.Token)}
	return o.Run(ctx, scripts.RWRelease, keys, o.Token, r.ID, o.Lease().Milliseconds(),
		o.RecordTTL(), o.Keys.Channel, kindOf(r.Class), left[core.Read], left[core.Write]).Int64()
}

func (p *protocol) Abort(ctx context.Context, r *core.Request) error {
	o := p.o
	keys := []string{o.Keys.Lock, o.Keys.Record(o.Token), p.wq}
	// A hold the abort could not undo expires within a lease (the
	// handle's next acquire from zero holds also drops it).
	return o.Run(ctx, scripts.RWAbort, keys, o.Token, r.ID, o.RecordTTL(), o.Keys.Channel,
		kindOf(r.Class), r.Held[core.Read], r.Held[core.Write]).Err()
}

func (l *RWMutex) counts(ctx context.Context) (r, w int, err error) {
	if err := l.h.Check(); err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	res, err := l.h.Run(ctx, scripts.RWCount, []string{l.h.Keys.Lock}, l.h.Token).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return 0, 0, l.errorf("hold-count", err)
	}
	return int(res[0]), int(res[1]), nil
}

package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
)

// Scripts is the script set of an exclusive lock type. Their KEYS and ARGV
// share one layout, to which Extension appends:
//
//	acquire KEYS lock, fence, record            ARGV token, lease ms, request, count, fencing, record ms
//	release KEYS lock, record                   ARGV token, request, lease ms, record ms, channel, final
//	abort   KEYS lock, record                   ARGV token, request, record ms, channel, count before
type Scripts struct {
	Acquire, Release, Abort *redis.Script
	// SetNX makes a new hold's first attempt a native SET NX PX (the plain
	// mutex without fencing): one cheap command when the lock is free, the
	// acquire script only when it is not (which also recognises a resent
	// SET of this owner that had succeeded).
	SetNX bool
}

// Extension is what a lock type adds to the shared exclusive machinery.
type Extension struct {
	// Keys are appended to the KEYS of every script.
	Keys []string
	// AcquireArgs are appended to the acquire ARGV; block says whether the
	// caller will wait (a fair lock queues only blocking callers).
	AcquireArgs func(block bool) []any
	// ReleaseArgs are appended to the release and abort ARGV.
	ReleaseArgs []any
	// Channel overrides the wake-up channel waited on.
	Channel string
	// MaxWait caps a single timed wait (see WaitSpec).
	MaxWait time.Duration
	// Leave runs when a blocking acquire gives up (see WaitSpec.Leave).
	Leave func(ctx context.Context) error
}

// Exclusive is a handle of an exclusive lock (mutex, reentrant or fair):
// a Holder of one class of units, each Lock taking one.
type Exclusive struct {
	*Holder
	ext Extension
}

// exclusive is the Protocol of the exclusive lock types.
type exclusive struct {
	o         *Owner
	scripts   Scripts
	reentrant bool
	ext       Extension
}

// NewExclusive returns the handle state for an exclusive lock.
func NewExclusive(o Owner, s Scripts, reentrant bool, watchKind string, ext Extension) *Exclusive {
	x := &Exclusive{ext: ext}
	p := &exclusive{scripts: s, reentrant: reentrant, ext: ext}
	x.Holder = NewHolder(o, p, watchKind)
	p.o = &x.Owner
	return x
}

// Lock acquires, waiting as long as ctx allows.
func (x *Exclusive) Lock(ctx context.Context) error {
	if err := x.Check(); err != nil {
		return x.errorf("lock", err)
	}
	spec := WaitSpec{
		Channel: x.Keys.Channel,
		MaxWait: x.ext.MaxWait,
		Leave:   x.ext.Leave,
	}
	if x.ext.Channel != "" {
		spec.Channel = x.ext.Channel
	}
	return x.Wait(ctx, "lock", Units, 1, spec)
}

// TryLock makes one attempt.
func (x *Exclusive) TryLock(ctx context.Context) (bool, error) {
	if err := x.Check(); err != nil {
		return false, x.errorf("trylock", err)
	}
	return x.Try(ctx, "trylock", Units, 1)
}

// Unlock releases one hold.
func (x *Exclusive) Unlock(ctx context.Context) error {
	return x.Release(ctx, "unlock", Units, 1)
}

func (p *exclusive) Refuse(r *Request) error {
	if !p.reentrant && r.Held[Units] > 0 {
		return lockerr.AlreadyHeld
	}
	return nil
}

func (p *exclusive) Acquire(ctx context.Context, r *Request) ([]int64, error) {
	o := p.o
	if r.First && p.scripts.SetNX && !o.Cfg.Fencing && r.Held[Units] == 0 {
		ok, err := o.E.RDB.SetNX(ctx, o.Keys.Lock, o.Token, o.Lease()).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return []int64{1, 0}, nil
		}
	}
	keys := append([]string{o.Keys.Lock, o.Keys.Fence, o.Keys.Record(o.Token)}, p.ext.Keys...)
	fencing := 0
	if o.Cfg.Fencing {
		fencing = 1
	}
	args := []any{o.Token, o.Lease().Milliseconds(), r.ID, r.Held[Units], fencing, o.RecordTTL()}
	if p.ext.AcquireArgs != nil {
		args = append(args, p.ext.AcquireArgs(r.Block)...)
	}
	return o.Run(ctx, p.scripts.Acquire, keys, args...).Int64Slice()
}

func (p *exclusive) Release(ctx context.Context, r *Request) (int64, error) {
	o := p.o
	final := 0
	if r.Final() {
		final = 1
	}
	keys := append([]string{o.Keys.Lock, o.Keys.Record(o.Token)}, p.ext.Keys...)
	args := append([]any{o.Token, r.ID, o.Lease().Milliseconds(), o.RecordTTL(), o.Keys.Channel, final}, p.ext.ReleaseArgs...)
	return o.Run(ctx, p.scripts.Release, keys, args...).Int64()
}

func (p *exclusive) Abort(ctx context.Context, r *Request) error {
	o := p.o
	keys := append([]string{o.Keys.Lock, o.Keys.Record(o.Token)}, p.ext.Keys...)
	args := append([]any{o.Token, r.ID, o.RecordTTL(), o.Keys.Channel, r.Held[Units]}, p.ext.ReleaseArgs...)
	return o.Run(ctx, p.scripts.Abort, keys, args...).Err()
}

// Fence returns the fencing token of the current hold, or 0.
func (x *Exclusive) Fence() int64 { return x.Holder.Fence(Units) }

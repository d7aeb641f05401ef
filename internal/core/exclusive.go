package core

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/scripts"

	"github.com/relock-go/relock/internal/lockerr"
)

// Scripts is the script set of an exclusive lock type. They all take the
// same KEYS (lock, fencing counter, request record of the owner, queue,
// waiter deadlines) and these ARGV:
//
//	acquire  token, lease ms, request, count, fencing, record ms, block, heartbeat ms, wait id, claim ms, channel, starve ms, metadata
//	release  token, request, lease ms, record ms, channel, count left, starve ms
//	abort    token, request, record ms, channel, count before, starve ms
//	leave    token, wait id, count, channel, claim ms, fencing, starve ms, metadata
//
// where channel is where grants are pushed (the lock's channel, or the
// prefix of the waiters' own channels for the fair lock), and starve ms is
// how long the longest waiter may wait before a release hands the lock to
// it (StarvationThreshold; the fair lock always hands over).
type Scripts struct {
	Acquire, Release, Abort, Leave *scripts.Script
	// SetNX makes a new hold's first attempt a native SET NX PX (the plain
	// mutex without fencing): one cheap command when the lock is free, the
	// acquire script only when it is not (which also recognises a resent
	// SET of this owner that had succeeded).
	SetNX bool
}

// Extension is what a lock type adds to the shared exclusive machinery.
type Extension struct {
	// Channel is the channel a waiter subscribes to, and Push the channel
	// argument of the scripts; both default to the lock's channel.
	Channel, Push string
	// MaxWait caps a single timed wait (see WaitSpec).
	MaxWait time.Duration
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
	keys      []string
}

// NewExclusive returns the handle state for an exclusive lock.
func NewExclusive(o Owner, s Scripts, reentrant bool, watchKind string, ext Extension) *Exclusive {
	if ext.Channel == "" {
		ext.Channel = o.Keys.Channel
	}
	if ext.Push == "" {
		ext.Push = o.Keys.Channel
	}
	if ext.MaxWait == 0 {
		// Each attempt refreshes the waiter's queue entry: several per
		// heartbeat.
		ext.MaxWait = min(o.Heartbeat()/4, MaxWait)
	}
	x := &Exclusive{ext: ext}
	p := &exclusive{scripts: s, reentrant: reentrant, ext: ext}
	x.Holder = NewHolder(o, p, watchKind)
	p.o = &x.Owner
	// The scripts build the lock's other keys from its main key (see
	// scripts.deriving).
	p.keys = []string{o.Keys.Lock}
	return x
}

// Lock acquires, waiting as long as ctx allows; with fixed, for a hold of
// that lease (LockFor), else lease is 0.
func (x *Exclusive) Lock(ctx context.Context, op string, lease time.Duration, fixed bool) error {
	if err := x.CheckAcquire(lease, fixed); err != nil {
		return x.errorf(op, err)
	}
	return x.Wait(ctx, op, Units, 1, lease, WaitSpec{Channel: x.ext.Channel, MaxWait: x.ext.MaxWait})
}

// TryLock makes one attempt, with lease as Lock.
func (x *Exclusive) TryLock(ctx context.Context, op string, lease time.Duration, fixed bool) (bool, error) {
	if err := x.CheckAcquire(lease, fixed); err != nil {
		return false, x.errorf(op, err)
	}
	return x.Try(ctx, op, Units, 1, lease)
}

// Unlock releases one hold.
func (x *Exclusive) Unlock(ctx context.Context) error {
	return x.Release(ctx, "unlock", Units, 1)
}

// Fence returns the fencing token of the current hold, or 0.
func (x *Exclusive) Fence() int64 { return x.Holder.Fence(Units) }

func (p *exclusive) Refuse(r *Request) error {
	if !p.reentrant && r.Held[Units] > 0 {
		return lockerr.AlreadyHeld
	}
	return nil
}

func (p *exclusive) Grants() bool { return true }

func (p *exclusive) fencing() int {
	if p.o.Cfg.Fencing {
		return 1
	}
	return 0
}

func (p *exclusive) Acquire(ctx context.Context, r *Request) ([]int64, error) {
	o := p.o
	if r.First && p.scripts.SetNX && !o.Cfg.Fencing && r.Held[Units] == 0 {
		ok, err := o.SetNX(ctx, r.Lease)
		if err != nil {
			return nil, err
		}
		if ok {
			return []int64{1, 0}, nil
		}
	}
	block := 0
	if r.Block {
		block = 1
	}
	return o.Run(ctx, p.scripts.Acquire, p.keys, o.Token, r.Lease.Milliseconds(), r.ID, r.Held[Units],
		p.fencing(), r.RecordTTL(), block, o.Heartbeat().Milliseconds(), r.WaitID(),
		r.Claim.Milliseconds(), p.ext.Push, StarvationThreshold.Milliseconds(), o.Cfg.Metadata).Int64Slice()
}

func (p *exclusive) Release(ctx context.Context, r *Request) (int64, error) {
	o := p.o
	left := r.Left()[Units]
	return o.Run(ctx, p.scripts.Release, p.keys, o.Token, r.ID, r.Lease.Milliseconds(), r.RecordTTL(),
		p.ext.Push, left, StarvationThreshold.Milliseconds()).Int64()
}

func (p *exclusive) Abort(ctx context.Context, r *Request) error {
	o := p.o
	return o.Run(ctx, p.scripts.Abort, p.keys, o.Token, r.ID, r.RecordTTL(), p.ext.Push, r.Held[Units],
		StarvationThreshold.Milliseconds()).Err()
}

func (p *exclusive) Leave(ctx context.Context, r *Request) error {
	o := p.o
	return o.Run(ctx, p.scripts.Leave, p.keys, o.Token, r.WaitID(), r.Held[Units], p.ext.Push,
		r.Claim.Milliseconds(), p.fencing(), StarvationThreshold.Milliseconds(), o.Cfg.Metadata).Err()
}

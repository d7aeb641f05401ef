package core

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/scripts"

	"github.com/relock-go/relock/internal/lockerr"
)

// Scripts is the script set of an exclusive lock type. They all take one
// key, the lock's main key (they build its other keys: see
// scripts.deriving), and these ARGV:
//
//	acquire  token, lease ms, request, count, fencing, wait arguments (Request.WaitArgs), metadata if any
//	release  token, request, count left (not the mutex's), then lease ms (a partial release) or record TTL (a final one, if Request.KeptRecord says)
//	abort    token, request, record ms, count before
//	leave    token, wait id, count, claim ms, fencing, metadata
//
// Grants are pushed on the lock's channel (the fair lock: on the waiter's
// own channel, Keys.WaitPrefix and its token); a mutex or reentrant
// release hands the lock to a waiter that has waited longer than
// StarvationThreshold (the fair lock always hands over).
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
	// Channel is the channel a waiter subscribes to (by default the
	// lock's channel).
	Channel string
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
	// busy is set when the handle's last acquire call found the lock
	// held: its next call starts with the script, not with a SET NX that
	// would most likely be refused too (a contended mutex's acquisition
	// then costs one command fewer); a first attempt granted clears it.
	// Guarded by the handle's mutex.
	busy bool
}

// NewExclusive returns the handle state for an exclusive lock.
func NewExclusive(o Owner, s Scripts, reentrant bool, watchKind string, ext Extension) *Exclusive {
	if ext.Channel == "" {
		ext.Channel = o.Keys.Channel
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

func (p *exclusive) Records() bool { return true }

func (p *exclusive) fencing() int {
	if p.o.Cfg.Fencing {
		return 1
	}
	return 0
}

func (p *exclusive) Acquire(ctx context.Context, r *Request) ([]int64, error) {
	o := p.o
	if r.First && p.scripts.SetNX && !p.busy && !o.Cfg.Fencing && r.Held[Units] == 0 {
		ok, err := o.SetNX(ctx, r.Lease)
		if err != nil {
			return nil, err
		}
		if ok {
			return []int64{1, 0}, nil
		}
	}
	res, err := o.Run(ctx, p.scripts.Acquire, p.keys, append([]any{o.Token, r.Lease.Milliseconds(), r.ID, r.Held[Units],
		p.fencing(), r.WaitArgs(o.Heartbeat(), r.WaitID())}, o.Metadata()...)...).Int64Slice()
	if err == nil && len(res) > 0 {
		if res[0] == 0 {
			p.busy = true
		} else if r.First {
			p.busy = false
		}
	}
	return res, err
}

func (p *exclusive) Release(ctx context.Context, r *Request) (int64, error) {
	o := p.o
	// Every argument costs the script: the mutex's release (never
	// partial) takes none beyond the request, and a final release sends
	// its record's TTL only when the lease left will not do.
	args := append(make([]any, 0, 4), o.Token, r.ID) // room for the optional two: one allocation
	left := r.Left()[Units]
	if p.reentrant {
		args = append(args, left)
	}
	if left > 0 {
		args = append(args, r.Lease.Milliseconds())
	} else if ttl := r.KeptRecord(); ttl != "" {
		args = append(args, ttl)
	}
	return o.Run(ctx, p.scripts.Release, p.keys, args...).Int64()
}

func (p *exclusive) Abort(ctx context.Context, r *Request) error {
	o := p.o
	return o.Run(ctx, p.scripts.Abort, p.keys, o.Token, r.ID, r.RecordTTL(), r.Held[Units]).Err()
}

func (p *exclusive) Leave(ctx context.Context, r *Request) error {
	o := p.o
	return o.Run(ctx, p.scripts.Leave, p.keys, o.Token, r.WaitID(), r.Held[Units],
		r.Claim.Milliseconds(), p.fencing(), o.Cfg.Metadata).Err()
}

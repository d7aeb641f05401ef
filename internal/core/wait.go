package core

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/notify"
)

// MaxWait caps every timed wait between acquire attempts. Wake-ups are
// pushed, so this only matters when a push is lost (a broken subscription):
// then a waiter tries again at least this often instead of hanging.
const MaxWait = time.Second

// Attempt tries to acquire once. It reports whether it acquired, and if
// not, how long the current hold has left: 0 in its last millisecond,
// Unknown (or any negative duration) when that is not known.
type Attempt func(ctx context.Context) (ok bool, ttl time.Duration, err error)

// Unknown is the ttl of a refused Attempt that does not know how long the
// current hold has left: the wait that follows is the cap.
const Unknown time.Duration = -1

// Waiter is one blocking acquire, as Engine.Wait drives it.
type Waiter interface {
	// Attempt tries to acquire once (see the Attempt type). It is called
	// first and after every wake-up or timer.
	Attempt(ctx context.Context) (ok bool, ttl time.Duration, err error)
	// Leave runs when the wait gives up (a waiter leaves its queue,
	// passing on a grant it did not take), with a context that outlives
	// the caller's (see Detach). If it fails, the waiter's registration
	// lapses by itself.
	Leave(ctx context.Context) error
	// Addr returns the address of this wait for grants (asked when the
	// wait joins or subscribes, and then the same), or "": a release that
	// makes this waiter the owner pushes a grant addressed to it on the
	// wait's channel.
	Addr() string
	// Granted is called with a grant's data; it reports whether the wait
	// took the grant (and so acquired). When it did not (the grant came
	// too late to be used safely), the wait tries again at once, which
	// finds the grant at Redis.
	Granted(data string) bool
}

// WaitSpec describes where a blocking acquire waits.
type WaitSpec struct {
	// Channel is subscribed to for wake-ups while waiting.
	Channel string
	// MaxWait overrides the cap on a single timed wait when > 0 (the fair
	// lock waits at most a fraction of its heartbeat between attempts).
	MaxWait time.Duration
}

// Wait blocks until w acquires, ctx ends or the engine closes. The first
// attempt is made before subscribing (the uncontended path is one round
// trip); once subscribed, an attempt is made again before waiting, so a
// release between the first attempt and the subscription is not missed.
// When this Client is subscribed to the channel already (another local
// waiter's subscription, or one that lingers after the last waiter left:
// notify.Hub.Join), subscribing sends nothing: the wait joins it first,
// and its first attempt is the one made subscribed (one attempt before
// the wait, not two). On ctx end the error matches both
// lockerr.NotObtained and ctx.Err(), and nothing is left subscribed.
func (e *Engine) Wait(ctx context.Context, spec WaitSpec, w Waiter) error {
	giveUp := func(err error) error {
		_ = w.Leave(Detach(ctx))
		return err
	}
	// Without a subscription (a polling Client; the hub could not open its
	// connection, e.g. a Ring shard is down; Redis refuses subscriptions)
	// the waiter still waits, on its timer alone: a nil channel never
	// fires.
	var wake <-chan struct{}
	var sub *notify.Sub
	if e.poll == 0 {
		// Subscribed already: no attempt before subscribing.
		sub = e.Hub.Join(spec.Channel, w.Addr)
	}
	if sub == nil {
		ok, _, err := w.Attempt(ctx)
		if err != nil {
			return giveUp(err)
		}
		if ok {
			return nil
		}
		if e.poll == 0 {
			sub, err = e.Hub.Subscribe(ctx, spec.Channel, w.Addr())
			if err != nil {
				if gerr := lockerr.CtxGaveUp(ctx); gerr != nil {
					return giveUp(gerr)
				}
				if uerr := e.Usable(); uerr != nil {
					return giveUp(lockerr.GaveUp(uerr))
				}
			}
		}
	}
	if sub != nil {
		defer sub.Close()
		wake = sub.C
	}

	capWait := MaxWait
	if spec.MaxWait > 0 {
		capWait = spec.MaxWait
	}
	if e.poll > 0 {
		capWait = min(capWait, e.poll)
	}
	timer := time.NewTimer(0)
	if !timer.Stop() {
		<-timer.C
	}
	defer timer.Stop()
	for {
		ok, ttl, err := w.Attempt(ctx)
		if err != nil {
			return giveUp(err)
		}
		if ok {
			return nil
		}
		timer.Reset(WaitFor(ttl, capWait))
		select {
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
			if g, ok := sub.Grant(); ok && w.Granted(g) {
				return nil
			}
		case <-timer.C:
		case <-ctx.Done():
			return giveUp(lockerr.GaveUp(ctx.Err()))
		case <-e.closed:
			return giveUp(lockerr.GaveUp(lockerr.Closed))
		}
	}
}

// WaitFuncs is a Waiter made of functions (nil Leave, Addr or Granted: no
// queue, no grants).
type WaitFuncs struct {
	AttemptFunc Attempt
	LeaveFunc   func(ctx context.Context) error
}

// Attempt implements Waiter.
func (f WaitFuncs) Attempt(ctx context.Context) (bool, time.Duration, error) {
	return f.AttemptFunc(ctx)
}

// Leave implements Waiter.
func (f WaitFuncs) Leave(ctx context.Context) error {
	if f.LeaveFunc == nil {
		return nil
	}
	return f.LeaveFunc(ctx)
}

// Addr implements Waiter: no grants.
func (WaitFuncs) Addr() string { return "" }

// Granted implements Waiter: no grants.
func (WaitFuncs) Granted(string) bool { return false }

// WaitFor is how long to sleep when the holder has ttl left (a script's
// PTTL: whole milliseconds, rounded down): until it has expired, one
// millisecond past ttl (a key whose PTTL is 0 still lives), capped at
// capWait, plus up to a tenth more so that waiters do not retry in step.
// A negative ttl (Unknown) waits the cap.
func WaitFor(ttl, capWait time.Duration) time.Duration {
	if ttl < 0 {
		ttl = capWait
	} else {
		ttl = min(ttl+time.Millisecond, capWait)
	}
	return ttl + time.Duration(rand.Int64N(int64(ttl/10)+1))
}

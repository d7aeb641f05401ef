package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/force"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Errors of the election package; match them with errors.Is.
var (
	// ErrNotLeader is returned by Resign and Proclaim from a handle that
	// does not lead: it never campaigned, resigned already, or lost its
	// leadership. The error also matches relock.ErrNotHeld, and when the
	// leadership was lost, why: relock.ErrLeaseExpired, relock.ErrLockGone
	// or relock.ErrClosed. Nothing of the current leader is touched.
	ErrNotLeader = errors.New("election: not the leader")

	// ErrNoLeader is returned by Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
)

// MaxValueLen is the longest value a candidate or leader may have, in
// bytes.
const MaxValueLen = 64 << 10

// Election is a handle on a named election: a candidate, and the leader
// once its Campaign returns, until it resigns or loses the leadership.
// The handle is the owner of its leadership: it carries a random 128-bit
// owner token, and only this handle can proclaim or resign. Two handles
// never share a leadership, even for the same name in one process. Any
// handle can read the leader (Leader) and observe the election (Observe),
// campaigning or not.
//
// An Election is made by New, is safe for concurrent use and must not be
// copied. Its zero value is not usable.
type Election struct {
	h    *core.Holder
	p    *protocol
	slot chan struct{} // one Campaign at a time
	pmu  chan struct{} // one Proclaim at a time
}

// New returns a handle on the election called name. It never fails: an
// invalid name or option, or a nil client, is reported by every call, as an
// error matching relock.ErrInvalidName, relock.ErrInvalidOption or
// relock.ErrNilClient.
//
// The options are the locks': relock.WithLease gives each leadership a
// fixed lease instead of the watchdog's renewals (it then ends, and Lost
// fires, when the lease runs out); relock.WithHeartbeat sets how long a
// candidate keeps its place in the queue without showing it is alive
// (default 5 s): a candidate whose process died delays the others by at
// most that. relock.WithToken (see Resume) and relock.WithSyncReplicas
// work as for the locks (a leadership that too few replicas confirmed is
// given back at once, and Campaign returns an error matching
// relock.ErrNotReplicated; observers see it lead, then the vacancy or
// the next leader); relock.WithFencing is implied (every leadership has a
// term).
func New(c *relock.Client, name string, opts ...relock.LockOption) *Election {
	o := core.NewOwner(c, "election", name, core.Options(opts))
	e := &Election{slot: make(chan struct{}, 1), pmu: make(chan struct{}, 1)}
	e.h = core.NewHolder(o, nil, watchdog.KindHash)
	e.p = newProtocol(&e.h.Owner)
	e.h.Speak(e.p, "")
	return e
}

// Campaign makes the handle a candidate with value and waits until it is
// the leader, or ctx ends. Candidates are served strictly in the order
// they joined the election's queue at Redis, whatever their Client or
// process; a candidate whose process died drops out within its heartbeat
// (relock.WithHeartbeat). When the leader resigns, the next candidate is
// made leader by the resignation itself and told by a push on its own
// channel; when the leader's lease runs out, the next candidate finds it
// at its next attempt (within a quarter of its heartbeat, at most a
// second, of the expiry). On return the handle leads: Term is its term,
// and Lost, LostErr and HoldContext report the loss of the leadership.
//
// On ctx end it returns an error matching both relock.ErrNotObtained and
// ctx.Err(), and leaves nothing behind: the candidate has left the queue
// (a leadership granted to it meanwhile goes to the next candidate), and
// neither a subscription nor a goroutine is left. When the Client is
// closed meanwhile, the error matches relock.ErrNotObtained and
// relock.ErrClosed, with the same clean-up.
// A Redis error (unreachable, a timeout) ends the wait too: it returns
// that error after the same clean-up (what a Redis that does not answer
// keeps of the attempt expires on its own, within the lease); call it
// again to campaign again.
//
// A Campaign of a handle that leads fails at once with an error matching
// relock.ErrAlreadyHeld; a second Campaign of the handle while one waits
// waits for the first to return. After the handle's leadership was lost
// it may campaign again without resigning first. value must be at most
// MaxValueLen bytes long (else an error matching relock.ErrInvalidOption);
// it may be empty.
func (e *Election) Campaign(ctx context.Context, value string) error {
	const op = "campaign"
	if err := e.check(op, value); err != nil {
		return err
	}
	select {
	case e.slot <- struct{}{}:
	case <-ctx.Done():
		return e.errorf(op, lockerr.GaveUp(ctx.Err()))
	}
	defer func() { <-e.slot }()
	if e.h.Held(core.Units) > 0 {
		return e.errorf(op, fmt.Errorf("%w: this handle leads already", lockerr.AlreadyHeld))
	}
	// A leadership this handle lost is settled: the unlock it owes (see
	// "When a hold is lost" in package relock) sends nothing, or resends a
	// resignation whose reply was lost. Without one, nothing is sent.
	_ = e.h.Release(ctx, "resign", core.Units, 1)
	e.p.value = core.Fingerprint(e.h.Token) + value
	return e.h.Wait(ctx, op, core.Units, 1, 0, core.WaitSpec{
		Channel: e.p.prefix + e.h.Token,
		// Each attempt is the candidate's heartbeat: several per timeout.
		MaxWait: min(e.h.Heartbeat()/4, core.MaxWait),
	})
}

// Resign ends the handle's leadership: the candidate at the head of the
// queue is made leader by the same script (and told by a push), or the
// election is vacant. Observers are told either way. Without a leadership
// (never elected, resigned already, or lost) it returns an error matching
// ErrNotLeader and relock.ErrNotHeld (with why it was lost) and changes
// nothing. Calling it again after a network error is safe: the same
// request is sent, which Redis answers as the first time.
//
// As every release in relock, it is not cancelled by ctx: it is sent, and
// its reply awaited for up to 5 s, even when ctx has ended (ctx's values
// are kept), and renewals of the leadership stop when it is called, so a
// Resign whose outcome cannot be known (Redis unreachable) ends the
// leadership with its lease at the latest.
func (e *Election) Resign(ctx context.Context) error {
	const op = "resign"
	err := e.h.Release(ctx, op, core.Units, 1)
	if err != nil && errors.Is(err, lockerr.NotHeld) {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return e.notLeader(op, err)
	}
	return err
}

// Proclaim changes the leader's value to value, in one script call that
// checks that this handle still leads its term; observers are told. A
// value equal to the current one changes nothing (and is not reported).
// Without a leadership it returns an error matching ErrNotLeader and
// relock.ErrNotHeld and sends nothing; when Redis no longer has this
// handle's leadership, the leadership is lost (Lost fires) and the error
// matches ErrNotLeader, relock.ErrNotHeld and relock.ErrLockGone. When
// Redis is unreachable it returns the error, and the value may or may not
// have changed. value must be at most MaxValueLen bytes long.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	const op = "proclaim"
	if err := e.check(op, value); err != nil {
		return err
	}
	select {
	case e.pmu <- struct{}{}:
	case <-ctx.Done():
		return e.errorf(op, ctx.Err())
	}
	defer func() { <-e.pmu }()
	term := e.h.Fence(core.Units)
	if term == 0 {
		cause := e.h.LostErr()
		if cause == nil {
			cause = lockerr.NotHeld
		}
		return e.notLeader(op, cause)
	}
	res, err := e.h.RunShared(ctx, scripts.ElectionProclaim, e.p.keys, e.h.Token, term, value,
		e.h.Keys.Channel, e.p.logTTL()).Int()
	if err != nil {
		return e.errorf(op, err)
	}
	if res < 0 {
		cause := lockerr.Loss(lockerr.Gone, "leadership gone, expired or taken by another owner")
		e.h.LoseIf(core.Units, term, cause)
		return e.notLeader(op, cause)
	}
	return nil
}

// Leader returns the election's leader now: its value, term and since
// when it leads (one script call). When nobody leads it returns an error
// matching ErrNoLeader. A leadership just granted to a candidate that has
// not taken it yet counts (it leads at Redis, for its claim lease).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	const op = "leader"
	if err := e.h.Check(); err != nil {
		return Leader{}, e.errorf(op, err)
	}
	st, err := e.read(ctx, "")
	if err != nil {
		return Leader{}, e.errorf(op, err)
	}
	if st.leader.Vacant() {
		return Leader{}, e.errorf(op, ErrNoLeader)
	}
	return st.leader, nil
}

// RemainingLease returns how long the leadership has before it expires
// unless renewed (one PTTL), or 0 when nobody leads.
func (e *Election) RemainingLease(ctx context.Context) (time.Duration, error) {
	return e.h.RemainingLease(ctx)
}

// ForceResign ends the leadership whatever its owner (its handle and
// Client need not be known) and makes the head of the queue the leader,
// as a Resign would; it reports whether there was a leadership to end. It
// is meant for operators (a leader stuck after a bug). The former leader
// learns it at its watchdog's next renewal (within a third of the
// watchdog timeout; with a fixed lease, at its local deadline): its Lost
// channel fires and its Resign returns an error matching ErrNotLeader. It
// is applied once even when resent after a lost reply. After a network
// error its outcome is unknown; calling it again is a new request, which
// ends whatever leadership there is then.
func (e *Election) ForceResign(ctx context.Context) (bool, error) {
	if err := e.h.Check(); err != nil {
		return false, e.errorf("force-resign", err)
	}
	out, err := force.Unlock(ctx, &e.h.Owner, 0, nil)
	if err != nil {
		return false, e.errorf("force-resign", err)
	}
	return out == force.Deleted, nil
}

// Leading reports whether this handle leads now, as far as it knows: true
// from a successful Campaign to its Resign, unless the leadership is known
// to be lost (see Lost). Past its local deadline it is: Leading reads the
// clock and declares the loss if the watchdog, late, has not yet, so it is
// false before another candidate can be elected. It asks nothing of Redis.
func (e *Election) Leading() bool { return e.h.Held(core.Units) > 0 }

// Term returns the term of the handle's leadership (its fencing token, see
// Leader.Term), or 0 when it does not lead (or lost the leadership).
func (e *Election) Term() int64 { return e.h.Fence(core.Units) }

// Lost returns a channel that is closed when the handle's current
// leadership is lost: its lease ran out (a fixed lease's end, or no
// renewal confirmed before the local deadline: Redis unreachable or slow,
// this process paused), it was ended by someone else (ForceResign, an
// operator's DEL, a restart or failover that lost it), or the Client was
// closed. A leadership that ends by Resign is not lost, and its channel
// stays open. Before the first Campaign that succeeded it returns nil: a
// receive from it blocks forever.
func (e *Election) Lost() <-chan struct{} { return e.h.Lost() }

// LostErr returns why the handle's most recent leadership was lost (an
// error matching relock.ErrNotHeld and one of relock.ErrLeaseExpired,
// relock.ErrLockGone or relock.ErrClosed), or nil if it was not lost.
func (e *Election) LostErr() error { return e.h.LostErr() }

// HoldContext returns a context derived from ctx that is cancelled when
// the handle's current leadership ends: lost (its cause is then LostErr's
// error, right after Lost fires), or resigned (cause
// context.Canceled, when Resign is called). When the handle does not lead,
// the context is cancelled already. Do gives its function such a
// context.
func (e *Election) HoldContext(ctx context.Context) context.Context { return e.h.HoldContext(ctx) }

// Extend sets the remaining lease of the handle's leadership to d (see
// mutex.Mutex.Extend): with relock.WithLease, its lease becomes d; with the
// watchdog, it is renewed now to at least d, and from then on to at least
// d.
func (e *Election) Extend(ctx context.Context, d time.Duration) error {
	return e.h.Extend(ctx, "extend", d)
}

// Resume adopts the leadership that the handle's owner token has in Redis
// (see mutex.Mutex.Resume): a handle made with relock.WithToken takes over
// the leadership of another handle of that token (in another process, or
// before a restart), with its term. It waits for a Campaign of this handle
// in progress to return first.
func (e *Election) Resume(ctx context.Context) error {
	// Not while a Campaign of the handle runs (it settles a lost
	// leadership before it waits, which must not be this one).
	select {
	case e.slot <- struct{}{}:
	case <-ctx.Done():
		return e.errorf("resume", ctx.Err())
	}
	defer func() { <-e.slot }()
	return e.h.Resume(ctx, "resume")
}

// Token returns the handle's owner token (see mutex.Mutex.Token). It is
// never shown in errors, events, log entries or Leader.
func (e *Election) Token() string { return e.h.Token }

// Fingerprint returns the handle's owner fingerprint, as Leader reports
// it (see mutex.Mutex.Fingerprint).
func (e *Election) Fingerprint() string { return core.Fingerprint(e.h.Token) }

// Run runs s with keys and args atomically with a check, in the same
// script call, that this handle still leads: a write guarded by the
// leadership (see relock.Script and mutex.Mutex.Run). A former leader's
// write is refused with an error matching relock.ErrNotHeld (and
// relock.ErrLockGone: the leadership is then lost, Lost fires); a handle
// that knows it does not lead sends nothing. On a Redis Cluster each key
// must be in the election's slot (its hash tag {name}).
func (e *Election) Run(ctx context.Context, s *relock.Script, keys []string, args ...any) *redis.Cmd {
	return e.h.RunGuarded(ctx, "run", core.GuardedOf(s), keys, args...)
}

// Name returns the election's name.
func (e *Election) Name() string { return e.h.Name }

// check returns why op cannot run with value: the handle's own error, the
// Client's, or a value too long.
func (e *Election) check(op, value string) error {
	if err := e.h.Check(); err != nil {
		return e.errorf(op, err)
	}
	if len(value) > MaxValueLen {
		return e.errorf(op, fmt.Errorf("%w: value of %d bytes, longer than %d", lockerr.InvalidOption, len(value), MaxValueLen))
	}
	return nil
}

// notLeader is op's error when the handle does not lead, because of cause
// (an error matching lockerr.NotHeld).
func (e *Election) notLeader(op string, cause error) error {
	return fmt.Errorf("election: %s %q: %w (%w)", op, e.h.Name, ErrNotLeader, cause)
}

func (e *Election) errorf(op string, err error) error {
	return fmt.Errorf("election: %s %q: %w", op, e.h.Name, err)
}

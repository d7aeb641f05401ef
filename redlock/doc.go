// Package redlock provides a lock held on a majority of N independent
// Redis masters (the Redlock algorithm), for when the lock must survive the
// failure of some of them.
//
// A single Redis (package mutex) is simpler, faster and, with fencing,
// safer; but while it is down nobody can lock, and a failover to a replica
// that missed the lock's write lets two owners in. A Mutex here is held
// while a majority of N independent masters (3 or 5 servers, not replicas
// of each other) keep its key: it keeps working while fewer than half of
// them are down or unreachable.
//
// # How it works
//
// The handle has one random owner token, the same on every master. Each
// master stores the lock as a plain mutex does (one string,
// relock:redlock:{name}, holding the token, with that master's lease as
// its TTL) and runs the plain mutex's scripts. A master's lease is
// LockFor's or relock.WithLease's, the same on every master, or else its
// own Client's watchdog timeout: Clients with different timeouts each take
// and renew their part with their own. The hold's validity, "the lease"
// below, is the smallest of them. As the mutex does, a call's first attempt (and
// each of TryLock's) sends a native SET NX PX, and the acquire script only
// to the masters where that was refused; with the mutex's double-fault
// cost (see package mutex): a copy of that SET still queued on an
// abandoned connection can, after the attempt gave up, hold that master
// for nobody until its lease ends.
//
//   - An attempt sends the acquire to every master at once, from one
//     goroutine each, and decides as soon as the replies allow: it
//     succeeds when a majority (len(clients)/2+1) granted it and less than
//     the validity time has passed since the attempt started (lease - time
//     taken - drift, drift = 1% of the lease + 2 ms); it fails as soon as
//     refusals leave no majority, or after the attempt timeout (a tenth of
//     the lease, within [100 ms, 1 s] and at most a third of the lease) for
//     masters that did not answer. The hold's local deadline starts at the
//     attempt's start, on the monotonic clock. After a majority granted
//     it, the attempt waits for the other masters as long again (at least
//     2 ms), so masters about as fast join the hold; one that answers even
//     later still joins it, or is aborted if the attempt failed. Masters
//     still busy with an earlier request of the handle (unreachable, or
//     slow) are waited for the same way, as long again, once every other
//     master answered and a majority of them without error: not for the
//     whole attempt timeout.
//   - A failed attempt is given back at once: an abort of its request on
//     every master that granted it or did not answer (the abort also
//     refuses a late copy of the acquire script, not of the SET NX). A Lock whose ctx ended gives
//     back what it took, and leaves its queues.
//   - Requests of one handle to one master run in the order sent (a
//     release or abort of this owner that ran after a newer grant would
//     delete it). A master with a request unanswered for longer than the
//     attempt timeout is not asked again until it answers: it counts as
//     unreachable.
//   - Waiting is as for the plain mutex, on every master: a refused Lock
//     queues itself on each master, subscribes to the lock's channel on
//     every master's Client (a release or abort publishes there), and
//     bounds every wait by a timer (the holder's remaining lease, at most a
//     second; a Client made with relock.WithPolling is not subscribed on,
//     and caps the timer at its interval). A release never hands the lock
//     to a waiter (a grant on one master is no majority); it wakes
//     waiters, who try again. When
//     contenders split the masters between them and nobody got a majority,
//     each backs off for a random time (up to twice the attempt's time,
//     doubling while it splits again, at most 200 ms), so they do not
//     retry in step.
//   - Without a fixed lease (relock.WithLease, LockFor), each master's
//     Client watchdog renews that master's key in its batches, as it does
//     for a plain mutex, and declares that master's part lost when a
//     renewal finds the key gone or taken, or when no renewal was
//     confirmed before that part's own local deadline. The hold is lost when fewer than a majority of its
//     parts are alive: a majority can then no longer be confirmed before
//     the validity ends. Lost fires, LostErr says why (the reason of the
//     part whose loss broke the majority), and Unlock returns an error
//     matching relock.ErrNotHeld. Each watchdog renews its part to its
//     own lease, every third of it, whatever the other masters' Clients
//     do. A part with a fixed lease is not renewed: it is lost at its
//     local deadline, and the hold with the majority's.
//   - Unlock stops the renewal of every part, releases on every master at
//     once and succeeds when a majority confirms; it waits for that longer
//     than an attempt would (half the lease, at most 5 s), even when its
//     ctx has ended: a release is not cancelled by ctx. A master that does
//     not answer keeps its part until that part's lease ends.
//
// # The hold as a Go value
//
// A Mutex offers what every relock lock handle does, adapted to a
// majority:
//
//   - LockFor and TryLockFor take a hold whose parts all get a lease of
//     their own, not renewed: its validity is that lease.
//   - Extend sets the lease of the parts held, on every such master at
//     once, and succeeds when a majority confirmed: a fixed lease becomes
//     d there, a watched hold is renewed to at least d (and kept at
//     max(d, its lease) by the watchdogs). The validity after it is the
//     smallest lease of that majority, from when Extend was called. A
//     master that no longer has the key loses its part there; with fewer
//     than a majority left, the hold is lost (relock.ErrNotHeld). Too few
//     replies: ErrNoQuorum.
//   - HoldContext returns a context that ends with the hold: when the
//     majority is lost (as Lost fires, with the loss as its cause) or
//     Unlock is called (context.Canceled). relock.Do passes it to its
//     function, and starts no goroutine for a Mutex.
//   - Token and Fingerprint give the owner token (the same on every
//     master) and its fingerprint (safe to log). A handle made with
//     relock.WithToken, on Clients of its own, can Resume the hold of
//     another handle of that token: it adopts the parts the token holds,
//     when they are a majority with time left. Handles of one token number
//     their requests after a random prefix each, since they share each
//     master's request record.
//
// # Errors
//
// ErrNoQuorum (wrapping each master's error) when fewer than a majority of
// the masters could be asked or answered: down, unreachable, slower than
// the attempt timeout, or their Client closed. Lock returns it at once,
// without waiting (it also matches relock.ErrNotObtained). TryLock returns
// (false, nil) when a majority answered but did not grant it: another
// owner holds it, or the masters stay split after three retries (see
// Mutex.TryLock). Invalid input is reported by
// every call: no client, a nil Client (relock.ErrNilClient), the same
// Client or the same server address twice (relock.ErrInvalidOption), an
// invalid name or option. Any number of masters works, the majority being
// len(clients)/2+1; use an odd number: 4 masters tolerate one failure, like
// 3.
//
// # Fencing
//
// relock.WithFencing is refused (relock.ErrInvalidOption). Each master can
// count, but independent counters do not make one token that strictly
// increases per lock: two holds taken on different majorities can get the
// same maximum, and a master that restarts without persistence loses its
// counter. A token that is safe to fence with needs agreement among the
// masters, which is what Redlock does not have (see below). If the
// protected resource needs fencing, take the token from a single source
// (a relock mutex with WithFencing on one server, the resource's own
// sequence, or a consensus store).
//
// relock.WithSyncReplicas is refused too: it narrows the failover window
// of a single master with replicas, and the masters here are meant to be
// independent servers without failover (a master that fails over to a
// replica that missed the write is a master that lost its keys: see the
// delayed-restart rule below).
//
// # Guarantees, and what they rest on
//
// Two owners never hold the lock at once while: each master keeps the keys
// it was given for their TTL (no restart without persistence that is not
// delayed, no failover of a master to a replica that missed the write, no
// eviction, no FLUSH, no jump of a master's clock), the masters' clocks
// and this process's clock run at about the same rate (the drift margin
// covers 1%), and the holder acts before its local deadline.
//
// A master that crashes and restarts without persistence (or fails over
// to a replica that missed the write) comes back without the keys it had.
// Restarted at once, it breaks mutual exclusion: if A holds exactly a
// majority, say masters {0, 1, 2} of 5, and master 2 comes back empty, B
// can take {2, 3, 4}, a majority, while A still believes it holds the
// lock. A learns it only later: with the watchdog, when its next renewal
// finds its key gone on master 2 (within a third of the lease), and Lost
// fires; with relock.WithLease, not before its lease ends. Until then both
// act as owners. The remedy is the delayed-restart rule of Redlock: keep a
// crashed master down for longer than the longest lease in use (or run it
// with appendfsync always), so every hold it knew of has expired or been
// declared lost (Lost fired: the others can no longer confirm a majority
// before its local deadline) before it answers again.
// TestRestartWithoutPersistence shows both: two owners after an
// immediate restart, none after a delayed one.
//
// Martin Kleppmann's critique ("How to do distributed locking", 2016)
// applies: the algorithm's safety rests on timing (bounded network delays,
// process pauses and clock drift), which real systems do not bound, and it
// has no fencing token. A process paused (GC, swap, a stopped VM) for
// longer than its validity time can still act after its lock was taken by
// another owner. Use this lock for efficiency (avoiding duplicate work,
// where a rare double run is tolerable) and availability. Where
// correctness depends on the lock, make the protected resource reject
// stale writers with a fencing token from a single source, or use a
// consensus system.
//
// # Operations
//
// Give each master's go-redis client a ReadTimeout that fits (or set
// ContextTimeoutEnabled): go-redis ignores ctx deadlines on the wire by
// default, so a request to an unreachable master holds its goroutine and
// connection until ReadTimeout, although the attempt stopped waiting for it
// after the attempt timeout (relock ends its ctx then, so it is not
// resent). Each master's keys are those of a plain mutex under the kind
// "redlock" (relock:redlock:{name}, :queue, :timeouts, and a record per
// request, :r:<token>:<id>, kept min(that master's part's lease, 15 s) and
// not swept as other types' records are); the relock command does not
// list this kind. Events (relock.WithObserver) of a Mutex go to the
// observers of its first Client; each Client's watchdog reports its own
// failed renewal rounds.
package redlock

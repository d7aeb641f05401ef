// Package relock provides distributed locks on Redis with the semantics
// Java users know from Redisson, for Go: a plain mutex (package mutex), a
// reentrant lock (package reentrant), a strictly FIFO fair lock (package
// fair), a read/write lock with sync.RWMutex semantics (package rwlock), a
// weighted semaphore whose permits cannot leak (package semaphore), a
// count-down latch (package latch), MultiLock, which takes several locks
// as one, a Redlock mutex over several independent masters (package
// redlock), and a leader election (package election).
//
// This package holds what they share: the Client, the options and the
// errors. A Client wraps a go-redis client and owns one watchdog goroutine,
// which renews every held lock in batches, and one pub/sub connection (one
// per shard on a go-redis Ring), which pushes release notifications to
// every waiter. Make one Client per
// Redis deployment, make lock handles from it with each lock package's New,
// and Close it when done.
//
// # What every lock does by construction
//
//   - Acquire sets the owner and the lease in one atomic command (a
//     script, or a mutex's SET NX PX): a crash can never leave a lock
//     without an expiry.
//   - Release checks the owner token atomically: a slow former holder never
//     deletes or extends the next holder's lock (its Unlock returns an error
//     matching ErrNotHeld).
//   - Without WithLease, the Client's watchdog renews the lease every
//     timeout/3 (default timeout 30s) while the lock is held, only while
//     this owner still holds it, never recreating a lost lock; a lost hold
//     is reported on the handle's Lost channel.
//   - Waiting is pushed, not polled: a release publishes a wake-up. Every
//     wait is also bounded by a timer, so a lost message delays a waiter and
//     never hangs it.
//   - Scripts are idempotent per request, so go-redis's automatic resend of
//     a command whose reply timed out neither double-counts a hold nor
//     fails spuriously. An acquire whose reply is lost, or that lands after
//     the caller's ctx ended, is undone.
//
// # Guarantees, and what they rest on
//
// Mutual exclusion holds while Redis keeps the lock's key: no restart
// without persistence, no failover that loses the write (Redis replication
// is asynchronous), no eviction (use a noeviction policy), no FLUSH, no jump
// of the server's clock, and while the holder acts before its local
// deadline (acquire start + lease - 1% - 2ms, moved forward by each
// confirmed renewal). A process paused longer than its lease (GC, swap, a
// stopped VM) may still believe it holds a lock that another owner now
// holds; no lock service can prevent that by itself. When correctness
// matters beyond these conditions, use WithFencing and have the protected
// resource reject stale tokens.
//
// # When a hold is lost
//
// A hold is lost when its lease runs out, its key is deleted or taken by
// another owner, no renewal is confirmed before the local deadline, or the
// Client is closed. The handle's Lost channel fires as soon as the watchdog
// or a call of the handle learns of it. The holds the caller took still
// count, as unlocks it owes: each of those Unlock calls (RUnlock for read
// holds) returns an error matching ErrNotHeld that says why the hold was
// lost, and until the last of them every Lock or TryLock (RLock,
// TryRLock) of the handle fails at once with ErrNotHeld, without asking
// Redis. So a nested Lock inside a critical section whose hold is gone
// never starts a fresh hold unnoticed. Once the caller has unlocked as
// many times as it locked (as a deferred Unlock does), the handle is
// usable again: its next Lock starts a new hold. A hold past its local
// deadline is lost even before the watchdog's timer says so (a timer fires
// late on a process starved of CPU): Held, Extend, Run, HoldContext and a
// re-entry declare it. A re-entry (or a further acquire of permits or read
// holds) that Redis granted, but whose reply came after the hold was
// declared lost, fails with that loss, and the owner's whole hold is given
// back at Redis at once (if Redis can be reached), so the lock passes to
// the next owner without waiting out a lease that nobody would release. A
// hold lost because its Client was closed is left at Redis for its lease,
// for another process to Resume.
//
// # The hold as a Go value
//
// Every lock handle of one Redis (mutex, reentrant, fair, rwlock,
// semaphore, and an election for its leadership) offers the same calls
// for its hold:
//
//   - Do(ctx, l, fn) locks l, runs fn with a context cancelled when the
//     hold is lost, and unlocks when fn returns or panics. It is the
//     shortest correct way to use a lock.
//   - HoldContext(ctx) returns that context for code that locks and
//     unlocks in different places: cancelled right after Lost fires (its
//     context.Cause is LostErr's error) or when Unlock is called.
//   - LockFor(ctx, lease) and TryLockFor take a hold with a fixed lease
//     of its own (as WithLease, for one hold); Extend(ctx, d) sets the
//     remaining lease of the current hold (a fixed lease becomes d; a
//     hold the watchdog renews is renewed now to at least d).
//   - Token() is the owner token, a capability; WithToken makes a handle
//     with a known token, and Resume adopts the hold that token has in
//     Redis (a hand-over to another process, or a restart).
//     Fingerprint() is what relock shows instead of the token.
//   - WithMetadata gives a short text (host, pid) that others read with
//     Holders(ctx) and the relock command.
//   - Run(ctx, script, keys, args...) runs a Script atomically with a
//     check that the handle still holds the lock: a stale holder's write
//     is refused.
//
// The others offer what fits them. The Lockers of an rwlock's RLocker and
// a semaphore's Locker have their handle's calls, with Lock, LockFor and
// Unlock of the read side or of n permits. A Multi has Do, HoldContext,
// LockFor, TryLockFor, Extend, Lost and LostErr (its parts keep their own
// tokens). A redlock.Mutex has all but Run and Holders: its hold is a
// majority of masters, which a script on one master cannot check, and
// the relock command, which reads one Redis, does not show it.
//
// # Releases and ended contexts
//
// A release (Unlock, RUnlock, a semaphore's Release, Resign) is not
// cancelled by its ctx: it is sent, and its reply awaited, even when ctx
// has ended (a deferred Unlock in an HTTP handler whose client went away
// still releases), for up to 5 s, with ctx's values. Renewals of a hold
// stop when its last release is called, whatever the outcome: a release
// that cannot be confirmed (Redis unreachable) ends with the lease at the
// latest, and calling it again resends it and reports what happened.
//
// # Names and keys
//
// A lock is identified by its kind and name: mutex.New(c, "x") and
// rwlock.New(c, "x") are independent locks with separate keys
// (relock:mutex:{x}, relock:rwlock:{x}), so they never collide or see each
// other's data types. All keys and channels of one lock share the hash tag
// {name}, so a lock lives in one Redis Cluster slot. A name may contain any
// bytes but must be non-empty, at most 1024 bytes long, and must not start
// with '}' (that would leave the hash tag empty); other names are refused
// with ErrInvalidName. An ACL user for relock needs the key pattern
// ~relock:* and the channel pattern &relock:*.
//
// # Errors
//
// Constructors never fail; invalid input (nil client, bad name, bad
// option) is reported by every call of the handle, before any Redis call,
// as an error matching ErrNilClient, ErrInvalidName or ErrInvalidOption.
// Errors wrap the operation, the lock name and the cause; match them with
// errors.Is. Owner tokens never appear in errors.
//
// # Contexts and go-redis
//
// Every call that talks to Redis takes a ctx. go-redis applies ctx
// deadlines to network reads only with Options.ContextTimeoutEnabled; by
// default an in-flight command runs to its reply (bounded by ReadTimeout).
// A Lock whose ctx ends meanwhile still returns an error matching ctx.Err()
// and gives back a lock that such a late reply granted: on a server that
// does not answer, it returns once the attempt in flight has timed out
// and that give-back (sent detached, for up to 5 s) has been tried, about
// 6 s after ctx ended with go-redis's defaults (3 s ReadTimeout).
package relock

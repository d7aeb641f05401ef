// Package election provides leader election on Redis, on relock's
// machinery: the candidates wait in a fair lock's queue (FIFO, with
// heartbeats), the leadership is a hold that the Client's watchdog renews,
// a resignation hands the leadership to the next candidate with a push,
// and every leadership has a term that is a fencing token.
//
//	e := election.New(c, "scheduler")
//	err := e.Do(ctx, "host-a:8080", func(ctx context.Context) error {
//		// Lead until ctx is done; give e.Term() to what you act on.
//	})
//
// Campaign waits to lead, Resign ends the leadership, Proclaim changes the
// leader's value, Leader reads who leads, Observe reports every change,
// and Lost, LostErr and HoldContext tell the leader that it lost the
// leadership, as for relock's locks.
//
// # Guarantees
//
//   - One leader at a time, as relock's mutual exclusion: the leadership is
//     one key whose owner is set together with its lease, renewed only
//     while that owner has it, and ended only by its owner (or an
//     operator's ForceResign).
//   - Terms: each new leadership takes the next value of a counter that
//     Redis keeps without a TTL (like relock.WithFencing's), so terms
//     strictly increase across handles, Clients and processes, and across
//     Redis restarts that keep every write (appendonly yes, appendfsync
//     always). Give the term (Term, Leader.Term) to what the leader acts
//     on, and have that refuse a lower one: that is what keeps out a
//     former leader that does not know yet that it lost. A restart or
//     failover that loses the latest writes (RDB snapshots only,
//     appendfsync everysec after a crash, a replica that lagged) sets the
//     counter back to what was kept, and terms issued since are issued
//     again: two leaderships may then share a term, one after the other.
//     Where that matters, have the resource also compare the leader's
//     Value (unique per candidate) for an equal term.
//   - Candidates are served in the order they joined the queue at Redis.
//     A live candidate is never dropped, however long it waits, while its
//     heartbeats reach Redis; one whose process died is dropped within its
//     heartbeat (relock.WithHeartbeat, default 5 s), so it delays the
//     others by at most that. (Redis stalled for longer than a heartbeat
//     looks like the death of every candidate: each one still campaigning
//     rejoins the queue, in the order its next call arrives.)
//   - Hand-over: Resign makes the next candidate leader in the same script
//     and pushes it the news, on which its Campaign returns (no polling
//     interval). A leader whose process died is replaced within one lease
//     (the watchdog timeout, default 30 s, or relock.WithLease) and about
//     a quarter of a heartbeat.
//   - Loss: the leader learns that it lost the leadership as a lock holder
//     does, from its watchdog (the leadership was ended by someone else,
//     or no renewal was confirmed before its local deadline: Redis
//     unreachable, this process paused) or from a Proclaim: Lost fires,
//     HoldContext's contexts end with the loss as their cause, and Resign
//     returns an error matching ErrNotLeader and the reason.
//   - Observe reports every new leader, every change of value and every
//     vacancy, in order, without skipping any (see Observe for its
//     bounds); changes are pushed, not polled.
//   - Nothing is left behind: a Campaign that gives up leaves the queue at
//     once (a leadership granted to it meanwhile goes on to the next
//     candidate), without a subscription or goroutine left; every key but
//     the term counter has a TTL, and is gone within one lease (or
//     heartbeat, if longer) once leaders and candidates are gone.
//   - Owner tokens are never shown: Leader carries the leader's
//     fingerprint (its handle's Fingerprint).
//
// # Limits
//
// As for every relock lock, the guarantees hold while Redis keeps the
// election's keys (no restart without persistence, no failover that loses
// the write, no eviction, no FLUSH, no jump of the server's clock) and
// while the leader acts before its local deadline. A leader paused longer
// than its lease (GC, swap, a stopped VM) may still believe it leads while
// another leads: only the term, checked by the resource, keeps it out.
// After Redis lost the election's data, terms start again from 1: a
// resource that remembers the highest term it saw then refuses the new
// leader's until they catch up, which is how the loss is noticed. Observe
// bounds its history (see there), and pushes are best effort: a lost push
// delays an observer by at most a second.
//
// # Compared with etcd and client-go
//
// etcd's concurrency.Election rests on Raft, which Redis cannot match for
// durability; it too serves candidates in order, but a dead candidate
// holds the line for its session's TTL (60 s by default), and its Observe
// may skip values and never reports a vacancy. client-go's leaderelection
// polls its lock object (every RetryPeriod, typically 2 s), lets whichever
// candidate's update wins take over once the lease looks expired by its
// own clock (no queue, no hand-over), and gives the leader no fencing
// token. Here candidates are FIFO, a dead one costs its heartbeat,
// hand-over and observation are pushed, observers see every change, and
// every term is a fencing token.
//
// # Data
//
// All keys share the hash tag {name}, so an election lives in one Redis
// Cluster slot: the leadership relock:election:{name} (a hash: the
// leader's token, term, value, fingerprint and start; TTL = lease), the
// term counter relock:election:{name}:fence (no TTL), the candidates'
// queue :queue and deadlines :timeouts (as the fair lock's), their values
// :values, the log of the last 100 changes :log (for observers; it lives
// a lease after its last change), and each handle's request record
// :r:<token>. Candidates are told on their own channels
// relock:election:{name}:w:<token>, observers on relock:election:{name}.
// The ACL rules of relock's locks cover elections (see docs/operations.md, "ACL").
package election

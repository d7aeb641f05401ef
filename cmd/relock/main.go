// Command relock shows and repairs relock's locks on a Redis server, for
// operators:
//
//	relock [flags] inspect NAME        every lock called NAME: owners, counts, TTL, waiters
//	relock [flags] list [PATTERN]      the locks whose name matches PATTERN (Redis glob, default *)
//	relock [flags] force-unlock NAME   delete the locks called NAME, held by the owners shown
//	relock [flags] watch NAME          inspect NAME again every -interval until interrupted
//
// Flags (before or after the subcommand):
//
//	-redis URL     the server: redis://[user:password@]host:port[/db], rediss://
//	               or unix://; a comma-separated list, or -cluster, for a Redis
//	               Cluster (default $RELOCK_REDIS, else redis://localhost:6379)
//	-cluster       treat -redis as seed nodes of a Redis Cluster
//	-json          one JSON object per lock and line instead of tables
//	-yes           force-unlock without asking
//	-timeout D     bound on each Redis call, and on connecting (default 5s)
//	-interval D    watch's refresh period (default 1s); watch -count N stops
//	               after N refreshes
//
// Owners are shown by their fingerprint (8 hex digits of a hash of the
// owner's token, the same as in relock's events and logs), never by their
// token. Lock types: mutex, reentrant, fair, rwlock, semaphore (with its
// permits: used and capacity) and latch; one name may have a lock of each
// type. A lock's state is "held" or "free", an rwlock's "read" or
// "write", and a latch's, which nobody holds, its count ("count 2"; "open"
// at zero). A fair lock whose hash is gone while waiters are still queued
// (or an rwlock whose hash is gone while writers are still registered as
// waiting) is shown as free, with its waiters.
//
// list walks the keyspace with SCAN (never KEYS), on every master of a
// cluster; request records, fencing counters and other auxiliary keys are
// not locks and are not listed.
//
// force-unlock shows each held lock's holders and asks for confirmation on
// stdin, unless -yes; it deletes the lock only while exactly the holders
// shown (or, with -yes, read) hold it, and wakes the lock's waiters; the
// former holders learn of it at their next renewal. "Exactly the holders
// shown" means the same owners, no more and no fewer, each whatever its
// hold count, read or write mode or permits now: an owner that re-entered
// or took or gave back permits meanwhile is still the one confirmed, while
// a holder that released everything, or a new one, makes the holders
// differ. Then nothing is deleted: the command prints the new holders and
// asks again about them; with -yes it deletes nothing of that lock and
// exits with status 1. Each deletion is one request that Redis applies
// once, even when resent after a lost reply or a Cluster's refusal while
// the lock's slot moves. With -json it prints one object per lock it
// deleted, found released, or (with -yes) kept: kind, name, deleted,
// owners (the holders asked about, or read), and for a lock whose holders
// changed, "changed": true and now_owners.
//
// Exit status: 0 on success, 1 when the command failed (no such lock,
// nothing deleted, with -yes a lock whose holders changed, Redis
// unreachable), 2 for a usage error.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

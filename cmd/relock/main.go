// Command relock shows and repairs relock's locks on a Redis server, for
// operators:
//
//	relock [flags] inspect NAME        every lock called NAME: owners, counts, TTL, waiters
//	relock [flags] list [PATTERN]      the locks whose name matches PATTERN (Redis glob, default *)
//	relock [flags] force-unlock NAME   delete the locks called NAME, whoever holds them
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
// force-unlock asks for confirmation on stdin for each lock it deletes,
// unless -yes, and wakes the lock's waiters; the former holder learns of
// it at its next renewal.
//
// Exit status: 0 on success, 1 when the command failed (no such lock,
// nothing deleted, Redis unreachable), 2 for a usage error.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

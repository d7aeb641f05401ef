// Command relock shows and repairs relock's locks on a Redis server, for
// operators, and runs commands under them:
//
//	relock [flags] inspect NAME        every lock called NAME: owners, counts, TTL, waiters
//	relock [flags] list [PATTERN]      the locks whose name matches PATTERN (Redis glob, default *)
//	relock [flags] force-unlock NAME   delete the locks called NAME, held by the owners shown
//	relock [flags] watch NAME          inspect NAME again every -interval until interrupted
//	relock [flags] run [flags] NAME -- COMMAND [ARGS...]
//	                                   run COMMAND holding the lock NAME: one at a time, across machines
//
// Flags (before or after the subcommand; run's own flags after run):
//
//	-redis URL     the server: redis://[user:password@]host:port[/db], rediss://
//	               or unix://; a comma-separated list, or -cluster, for a Redis
//	               Cluster (default $RELOCK_REDIS, else redis://localhost:6379)
//	-cluster       treat -redis as seed nodes of a Redis Cluster
//	-json          one JSON object per lock and line instead of tables
//	-yes           force-unlock without asking
//	-call-timeout D
//	               bound on each Redis call, and on connecting (default 5s)
//	-timeout D     the same as -call-timeout, except for run (see below)
//	-interval D    watch's refresh period (default 1s); watch -count N stops
//	               after N refreshes
//
// Owners are shown by their fingerprint (8 hex digits of a hash of the
// owner's token, the same as in relock's events and logs), never by their
// token. Lock types: mutex, reentrant, fair, rwlock, semaphore (with its
// permits: used and capacity), latch and election (its leader, term and
// queued candidates, each with its value, which -json calls metadata, and
// its term "fence"); one name may have a lock of each type. A redlock
// (package redlock), which lives on several independent masters, is not
// among them: the command reads one Redis deployment. A lock's state
// is "held" or "free" (an election with or without a leader), an rwlock's
// "read" or "write", and a latch's, which nobody holds, its count ("count
// 2"; "open" at zero). A fair lock whose hash is gone while waiters are still queued
// (or an rwlock whose hash is gone while writers are still registered as
// waiting) is shown as free, with its waiters.
//
// list walks the keyspace with SCAN (never KEYS), on every master of a
// cluster; request records, fencing counters and other auxiliary keys are
// not locks and are not listed.
//
// force-unlock shows each held lock's holders and asks for confirmation on
// stdin, unless -yes; it deletes the lock only while exactly the holders
// shown (or, with -yes, read) hold it, and wakes the lock's waiters (an
// election's next candidate is made leader, as by election.ForceResign); the
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
// # run
//
// run is the equivalent of consul lock and etcdctl lock: one instance of a
// command at a time across machines. For example, from cron on several
// machines:
//
//	relock -redis redis://redis:6379 run nightly-report -- ./report.sh --date today
//	relock -redis redis://redis:6379 run -try nightly-report -- ./report.sh   # skip if running elsewhere (exit 75)
//	relock -redis redis://redis:6379 run -n 3 -timeout 10m import -- ./import.sh   # at most 3 at once
//
// Its flags:
//
//	-n N           with N > 1, hold one permit of a semaphore of N permits
//	               called NAME instead of the mutex: at most N COMMANDs at once
//	-try           if the lock is held elsewhere, give up at once (exit 75)
//	-timeout D     give up after waiting D for the lock (exit 75); default 0,
//	               wait as long as it takes
//	-grace D       when the hold is lost, SIGKILL COMMAND D after SIGTERM
//	               (default 3s)
//	-lease D       the lock's lease (default 30s, relock.Client's watchdog
//	               timeout), renewed every third of it
//
// After run, -timeout is how long to wait for the lock, as in consul lock
// and etcdctl; the bound on each Redis call is -call-timeout (default 5s),
// which the other subcommands also call -timeout. A -timeout before run is
// a usage error, so that neither is taken for the other.
//
// run looks COMMAND up in $PATH, then waits for the lock NAME: a mutex made
// with relock.WithFencing, or with -n N one permit of a semaphore. A mutex
// and a semaphore of one name are two locks, and a semaphore refuses a
// handle of another capacity while it is held: every run of one NAME must
// use the same -n. Holding the lock, it starts COMMAND with stdin, stdout
// and stderr passed through, and in its environment RELOCK_NAME=NAME and
// RELOCK_FENCE, the hold's fencing token: a decimal integer that increases
// with every hold of NAME, which COMMAND can pass to the resource it writes
// to so that the resource refuses a former holder (see relock.WithFencing;
// its counter is a Redis key without TTL, relock:mutex:{NAME}:fence). With
// -n, RELOCK_FENCE is set and empty: a semaphore has no fencing token.
// A run that has waited a second for a lock held elsewhere says so on
// stderr, once, naming the holders by fingerprint and metadata:
//
//	relock: run: waiting for mutex "NAME", held by owner 1a2b3c4d ("relock run on host-b pid 4242: report.sh")
//
// When COMMAND exits, run releases the lock and exits with COMMAND's
// status. Messages name the owner by its fingerprint, never its token.
//
// The lease: the lock expires -lease after its last renewal. A relock run
// that crashes or is killed with SIGKILL leaves its lock for at most
// -lease; on Linux its child is killed with it (the child's own children
// are not).
//
// A lost hold: when the hold is lost (no renewal reached Redis before the
// lease ran out; the lock was deleted, or force-unlocked, which is noticed
// at the next renewal, within a third of -lease), COMMAND's process group
// gets SIGTERM, then SIGKILL -grace later (also when COMMAND exited on
// SIGTERM and left processes of its group running), and run exits with
// 124 once the group is gone or has been sent SIGKILL. By then
// the next holder may have the lock already (the key expired, or was
// deleted and a waiter woken), so a COMMAND that outlives its hold runs
// beside the next holder's until it exits: -grace bounds the part of that
// overlap that run controls. The default, 3s, leaves a SIGTERM handler
// time for a clean exit (flush, commit or roll back, close connections)
// and is short next to the 30s lease and the 10s between renewals, which
// bounds how late a deletion is noticed. A shorter -grace shortens the
// overlap; only a fencing token checked by the resource rules it out.
//
// Signals: COMMAND runs in a process group of its own, as under consul
// lock and timeout(1). A signal from run reaches COMMAND and the processes
// it started (except those that left its group: setsid, setpgid), and a
// signal from the terminal (^C, ^\) reaches relock run only, which passes
// it on once. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to relock run are
// passed on to COMMAND's process group (followed by SIGCONT, for a stopped
// COMMAND); the lock is released once COMMAND has exited, and run exits
// with COMMAND's status. While run waits for the lock, they end the wait
// (exit 128+N). ^Z (SIGTSTP) stops COMMAND's process group and relock run,
// and continuing relock run (fg, bg, SIGCONT) continues COMMAND: a COMMAND
// that ran on while relock run is stopped would outlive its lease. While
// both are stopped nothing renews the lease, so a stop longer than -lease
// loses the hold. Outside the terminal's foreground process group, COMMAND
// cannot read the terminal (SIGTTIN stops it): give it input by a pipe or
// a file. Processes that COMMAND leaves running when it exits are not
// waited for.
//
// Exit status of run: COMMAND's when it ran to its end (128+N if signal N
// killed it, as a shell reports it); 75 when the lock was not obtained
// (-try, -timeout), and COMMAND did not run (sysexits' EX_TEMPFAIL: try
// again later); 124 when the hold was lost and COMMAND stopped, or the
// release found the hold lost (as timeout(1) reports a command it
// stopped); 126 when COMMAND is not executable and 127 when it is not found
// (as in sh); 128+N when signal N ended the wait; 1 when run failed
// otherwise (Redis unreachable, a semaphore of another capacity); 2 for a
// usage error. A COMMAND that itself exits with one of these codes is told
// apart only by run's message on stderr (run writes one whenever the code
// is its own). run needs a Unix system.
//
// # Exit status
//
// 0 on success, 1 when the command failed (no such lock, nothing deleted,
// with -yes a lock whose holders changed, Redis unreachable), 2 for a
// usage error; run's are above.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

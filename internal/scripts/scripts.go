// Package scripts holds relock's Lua scripts, one file per operation, each
// opening with a header that states its KEYS, ARGV and reply.
//
// Every script gets all of its keys through KEYS (they share one lock's hash
// tag, so they live in one cluster slot) and every value through ARGV.
// Scripts that change a lock are idempotent per request id: go-redis resends
// a command whose reply timed out, and a second run must answer as the first.
package scripts

import (
	_ "embed" // for go:embed
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed record.lua
	record string
	//go:embed clock.lua
	clock string
	//go:embed mutex_acquire.lua
	mutexAcquire string
	//go:embed mutex_release.lua
	mutexRelease string
	//go:embed mutex_abort.lua
	mutexAbort string
	//go:embed reentrant_acquire.lua
	reentrantAcquire string
	//go:embed reentrant_release.lua
	reentrantRelease string
	//go:embed reentrant_abort.lua
	reentrantAbort string
	//go:embed reentrant_leave.lua
	reentrantLeave string
	//go:embed mutex_leave.lua
	mutexLeave string
	//go:embed handoff.lua
	handoffLua string
	//go:embed renew.lua
	renew string
	//go:embed force.lua
	force string
	//go:embed force_unlock.lua
	forceUnlock string
	//go:embed resume.lua
	resume string
	//go:embed queue.lua
	queue string
	//go:embed fair_common.lua
	fairCommon string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_release.lua
	fairRelease string
	//go:embed fair_abort.lua
	fairAbort string
	//go:embed fair_leave.lua
	fairLeave string
	//go:embed fair_force_unlock.lua
	fairForceUnlock string
)

// Scripts, run with Run (EVALSHA, then EVAL when the server answers NOSCRIPT,
// e.g. after SCRIPT FLUSH or a restart).
var (
	MutexAcquire     = newScript(barging(mutexAcquire))
	MutexRelease     = newScript(barging(mutexRelease))
	MutexAbort       = newScript(barging(mutexAbort))
	MutexLeave       = newScript(barging(mutexLeave))
	ReentrantAcquire = newScript(barging(reentrantAcquire))
	ReentrantRelease = newScript(barging(reentrantRelease))
	ReentrantAbort   = newScript(barging(reentrantAbort))
	ReentrantLeave   = newScript(barging(reentrantLeave))
	Renew            = newScript(clock + renew)
	Resume           = newScript(clock + resume)
	// ForceUnlock is the force-unlock of a mutex and a reentrant lock;
	// every force-unlock script shares the functions of force.lua.
	ForceUnlock = newScript(force + forceUnlock)
	// Scripts that change a lock share the functions of record.lua; the
	// fair-lock scripts also those of fair_common.lua.
	FairAcquire = newScript(fair(fairAcquire))
	FairRelease = newScript(fair(fairRelease))
	FairAbort   = newScript(fair(fairAbort))
	FairLeave   = newScript(fair(fairLeave))
	// FairForceUnlock wakes the queue's head, not the lock's channel.
	FairForceUnlock = newScript(fair(force + fairForceUnlock))
)

// The read/write-lock scripts; those that change a hold also share the
// request-record helpers of record.lua.
var (
	//go:embed rwlock_common.lua
	rwlockCommon string
	//go:embed rwlock_acquire.lua
	rwlockAcquire string
	//go:embed rwlock_release.lua
	rwlockRelease string
	//go:embed rwlock_abort.lua
	rwlockAbort string
	//go:embed rwlock_leave.lua
	rwlockLeave string
	//go:embed rwlock_count.lua
	rwlockCount string
	//go:embed rwlock_force_unlock.lua
	rwlockForceUnlock string

	RWAcquire     = newScript(rw(rwlockAcquire))
	RWRelease     = newScript(rw(rwlockRelease))
	RWAbort       = newScript(rw(rwlockAbort))
	RWLeave       = newScript(rw(rwlockLeave))
	RWCount       = newScript(clock + rwlockCount)
	RWForceUnlock = newScript(rw(force + rwlockForceUnlock))
)

// fair prepends what every fair-lock script uses.
func fair(src string) string { return record + clock + queue + fairCommon + src }

// barging prepends what every mutex and reentrant-lock script uses.
func barging(src string) string { return record + clock + queue + handoffLua + src }

// rw prepends what every read/write-lock script uses.
func rw(src string) string { return record + clock + queue + rwlockCommon + src }

// The semaphore scripts; all share record.lua, clock.lua, queue.lua and
// semaphore_common.lua.
var (
	//go:embed semaphore_common.lua
	semaphoreCommon string
	//go:embed semaphore_acquire.lua
	semaphoreAcquire string
	//go:embed semaphore_release.lua
	semaphoreRelease string
	//go:embed semaphore_abort.lua
	semaphoreAbort string
	//go:embed semaphore_leave.lua
	semaphoreLeave string
	//go:embed semaphore_available.lua
	semaphoreAvailable string
	//go:embed semaphore_force_release.lua
	semaphoreForceRelease string

	SemAcquire      = newScript(sem(semaphoreAcquire))
	SemRelease      = newScript(sem(semaphoreRelease))
	SemAbort        = newScript(sem(semaphoreAbort))
	SemLeave        = newScript(sem(semaphoreLeave))
	SemAvailable    = newScript(sem(semaphoreAvailable))
	SemForceRelease = newScript(sem(force + semaphoreForceRelease))
)

// sem prepends what every semaphore script uses.
func sem(src string) string { return record + clock + queue + semaphoreCommon + src }

// The election scripts; all share record.lua, clock.lua, queue.lua and
// election_common.lua.
var (
	//go:embed election_common.lua
	electionCommon string
	//go:embed election_campaign.lua
	electionCampaign string
	//go:embed election_resign.lua
	electionResign string
	//go:embed election_abort.lua
	electionAbort string
	//go:embed election_leave.lua
	electionLeave string
	//go:embed election_proclaim.lua
	electionProclaim string
	//go:embed election_observe.lua
	electionObserve string
	//go:embed election_force_resign.lua
	electionForceResign string

	ElectionCampaign    = newScript(election(electionCampaign))
	ElectionResign      = newScript(election(electionResign))
	ElectionAbort       = newScript(election(electionAbort))
	ElectionLeave       = newScript(election(electionLeave))
	ElectionProclaim    = newScript(election(electionProclaim))
	ElectionObserve     = newScript(election(electionObserve))
	ElectionForceResign = newScript(election(force + electionForceResign))
)

// election prepends what every election script uses.
func election(src string) string { return record + clock + queue + electionCommon + src }

// The count-down latch scripts; both share record.lua.
var (
	//go:embed latch_set.lua
	latchSet string
	//go:embed latch_count_down.lua
	latchCountDown string

	LatchSet       = newScript(record + latchSet)
	LatchCountDown = newScript(record + latchCountDown)
)

// sharded maps each script that publishes wake-ups to its twin for a
// Redis Cluster, which publishes them with SPUBLISH (sharded pub/sub: only
// the node of the lock's slot hears it, not every node of the cluster).
var sharded = map[*redis.Script]*redis.Script{}

// spublish is the twin's publish: SPUBLISH on the node that runs the
// script (the channel shares the lock's hash tag, so its slot); PUBLISH
// where SPUBLISH is unknown (Redis before 7), which the hub then cannot
// hear: its waiters poll (see notify).
const spublish = `local function spublish(channel, msg)
  local r = redis.pcall('SPUBLISH', channel, msg)
  if type(r) == 'table' and r.err then redis.call('PUBLISH', channel, msg) end
end
`

// newScript returns the script of src, and makes its sharded twin if it
// publishes.
func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	if strings.Contains(src, "redis.call('PUBLISH', ") {
		sharded[s] = redis.NewScript(spublish + strings.ReplaceAll(src, "redis.call('PUBLISH', ", "spublish("))
	}
	return s
}

// Sharded returns the twin of s that publishes with SPUBLISH (s itself
// if it publishes nothing), for a client of a Redis Cluster.
func Sharded(s *redis.Script) *redis.Script {
	if t := sharded[s]; t != nil {
		return t
	}
	return s
}

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
	//go:embed force_unlock.lua
	forceUnlock string
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
	MutexAcquire     = redis.NewScript(barging(mutexAcquire))
	MutexRelease     = redis.NewScript(barging(mutexRelease))
	MutexAbort       = redis.NewScript(barging(mutexAbort))
	MutexLeave       = redis.NewScript(barging(mutexLeave))
	ReentrantAcquire = redis.NewScript(barging(reentrantAcquire))
	ReentrantRelease = redis.NewScript(barging(reentrantRelease))
	ReentrantAbort   = redis.NewScript(barging(reentrantAbort))
	ReentrantLeave   = redis.NewScript(barging(reentrantLeave))
	Renew            = redis.NewScript(clock + renew)
	ForceUnlock      = redis.NewScript(forceUnlock)
	// Scripts that change a lock share the functions of record.lua; the
	// fair-lock scripts also those of fair_common.lua.
	FairAcquire = redis.NewScript(fair(fairAcquire))
	FairRelease = redis.NewScript(fair(fairRelease))
	FairAbort   = redis.NewScript(fair(fairAbort))
	FairLeave   = redis.NewScript(fair(fairLeave))
	// FairForceUnlock wakes the queue's head, not the lock's channel.
	FairForceUnlock = redis.NewScript(fair(fairForceUnlock))
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

	RWAcquire     = redis.NewScript(rw(rwlockAcquire))
	RWRelease     = redis.NewScript(rw(rwlockRelease))
	RWAbort       = redis.NewScript(rw(rwlockAbort))
	RWLeave       = redis.NewScript(rw(rwlockLeave))
	RWCount       = redis.NewScript(clock + rwlockCount)
	RWForceUnlock = redis.NewScript(rw(rwlockForceUnlock))
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

	SemAcquire      = redis.NewScript(sem(semaphoreAcquire))
	SemRelease      = redis.NewScript(sem(semaphoreRelease))
	SemAbort        = redis.NewScript(sem(semaphoreAbort))
	SemLeave        = redis.NewScript(sem(semaphoreLeave))
	SemAvailable    = redis.NewScript(sem(semaphoreAvailable))
	SemForceRelease = redis.NewScript(sem(semaphoreForceRelease))
)

// sem prepends what every semaphore script uses.
func sem(src string) string { return record + clock + queue + semaphoreCommon + src }

// The count-down latch scripts; both share record.lua.
var (
	//go:embed latch_set.lua
	latchSet string
	//go:embed latch_count_down.lua
	latchCountDown string

	LatchSet       = redis.NewScript(record + latchSet)
	LatchCountDown = redis.NewScript(record + latchCountDown)
)

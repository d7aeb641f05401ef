package bench

import "time"

// Config sets up the scenarios. The zero value of a field means its
// default, except Hold, where 0 means no critical section at all.
type Config struct {
	// Server is the Redis server; required.
	Server *Server
	// Duration is how long one measurement runs (default 1s).
	Duration time.Duration
	// Ops, when > 0, ends a measurement after that many operations
	// instead (cycles, hand-offs or acquisitions), as testing.B wants.
	Ops int
	// Hold is the critical section of the contention and read-heavy
	// scenarios.
	Hold time.Duration
	// HandoffHold is the mean hold before the holder releases in the
	// hand-off scenario (default 5ms); each hold is drawn uniformly
	// from [HandoffHold/2, 3*HandoffHold/2].
	HandoffHold time.Duration
	// WaitTimeout bounds one blocked acquire in the hand-off scenario and
	// the end of every measurement (default 5s): past it the lock is
	// reported stalled.
	WaitTimeout time.Duration
	// Readers and Writers are the read-heavy scenario's owners (default
	// 9 and 1).
	Readers, Writers int
	// WatchdogLocks is how many locks the watchdog scenario holds
	// (default 10,000 on a real server; 500 on miniredis, whose Lua
	// renews 1,000 locks too slowly for a 3s lease).
	WatchdogLocks int
	// PeerWatchdogLocks, when > 0, is how many locks the watchdog
	// scenario holds for peers (they may not cope with as many as relock).
	PeerWatchdogLocks int
	// WatchdogTimeout is the lease kept by automatic renewal in the
	// watchdog scenario (default 3s: relock renews every 1s).
	WatchdogTimeout time.Duration
	// WatchdogPeriods is how many renewal periods the watchdog scenario
	// counts commands over (default 3; 2 on miniredis).
	WatchdogPeriods int
	// StallAfter is the longest time without any acquisition, while
	// contenders wait, that is not reported as a stall (default 500ms).
	StallAfter time.Duration
	// ContendedOwners and ContendedHold are the owners and the critical
	// section of the hand-off under sustained contention (default 16 and
	// 1ms: long enough turns that the longest waiter of a mutex or a
	// reentrant lock passes the starvation threshold and is handed the
	// lock directly).
	ContendedOwners int
	ContendedHold   time.Duration
	// LockNames and LockWorkers set the many-locks scenario: LockWorkers
	// goroutines of one process lock names drawn at random out of
	// LockNames (default 100,000 and 64).
	LockNames, LockWorkers int
	// MemoryLocks and MemoryWaiters are the held locks and the queued
	// waiters whose Redis memory the redis-memory scenario measures
	// (default 1,000 each).
	MemoryLocks, MemoryWaiters int
	// RecordRate is the cycle rate at which the redis-memory scenario
	// computes the memory that request records hold at steady state
	// (default 10,000 cycles/s).
	RecordRate float64
	// RTT is the server's round-trip time, measured once per run; the
	// hand-off is also reported in round trips when it is set.
	RTT time.Duration
	// OnStart, if set, is called when the timed part of a measurement
	// begins (setup and warm-up done), e.g. to reset a testing.B timer.
	OnStart func()
}

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = time.Second
	}
	if c.HandoffHold <= 0 {
		c.HandoffHold = 5 * time.Millisecond
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = 5 * time.Second
	}
	if c.Readers <= 0 {
		c.Readers = 9
	}
	if c.Writers <= 0 {
		c.Writers = 1
	}
	if c.WatchdogLocks <= 0 {
		c.WatchdogLocks = 10000
		if c.Server != nil && !c.Server.Real() {
			c.WatchdogLocks = 500
		}
	}
	if c.WatchdogTimeout <= 0 {
		c.WatchdogTimeout = 3 * time.Second
	}
	if c.WatchdogPeriods <= 0 {
		c.WatchdogPeriods = 3
		if c.Server != nil && !c.Server.Real() {
			c.WatchdogPeriods = 2 // keep a default miniredis run short
		}
	}
	if c.StallAfter <= 0 {
		c.StallAfter = 500 * time.Millisecond
	}
	if c.ContendedOwners <= 0 {
		c.ContendedOwners = 16
	}
	if c.ContendedHold <= 0 {
		c.ContendedHold = time.Millisecond
	}
	if c.LockNames <= 0 {
		c.LockNames = 100000
	}
	if c.LockWorkers <= 0 {
		c.LockWorkers = 64
	}
	if c.MemoryLocks <= 0 {
		c.MemoryLocks = 1000
	}
	if c.MemoryWaiters <= 0 {
		c.MemoryWaiters = 1000
	}
	if c.RecordRate <= 0 {
		c.RecordRate = 10000
	}
	return c
}

func (c Config) started() {
	if c.OnStart != nil {
		c.OnStart()
	}
}

// budget tells a measurement loop when to stop: after Ops operations, or
// once Duration has passed.
type budget struct {
	ops  int
	end  time.Time
	done int
}

func (c Config) budget() *budget {
	return &budget{ops: c.Ops, end: time.Now().Add(c.Duration)}
}

// next reports whether another operation should run, counting it.
func (b *budget) next() bool {
	if b.ops > 0 {
		if b.done >= b.ops {
			return false
		}
	} else if !time.Now().Before(b.end) {
		return false
	}
	b.done++
	return true
}

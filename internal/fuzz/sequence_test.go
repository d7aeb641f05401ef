package fuzz_test

import "testing"

// Seeds written by hand, besides testdata/fuzz: a config byte, then steps
// (see run). With 2 handles and ops = 4 (exclusive locks), step byte
// 4*h + op runs op (0 TryLock, 1 Lock, 2 Unlock, 3 ForceUnlock) on handle h.
var exclusiveSeeds = [][]byte{
	{0, 0, 0, 2, 2},                 // TryLock twice, Unlock twice
	{4, 1, 5, 2, 5, 6},              // fencing: h0 holds, h1 waits in vain, h0 unlocks, h1 takes it
	{4, 0, 0, 3, 2, 0, 2, 2},        // a hold force-unlocked: the unlocks it owes, then a new hold
	{1, 0, 4, 3, 4, 0, 2, 6, 10, 8}, // 3 handles, a force-unlock while another waits to take over
	{2, 1, 1, 1, 2, 2, 2, 7, 13},    // 4 handles: re-entry, over-unlock, unlocks of holds never taken
	// Acquires whose ctx ended before the call (step byte | 0x80): on a
	// free lock, by the holder (the mutex: ErrAlreadyHeld), by another.
	{0, 0x81, 0x80, 0, 0x80, 0x81, 0x84, 0x85, 2, 0x85},
}

// FuzzMutex runs sequences of TryLock, Lock (waiting at most 5 ms when the
// model says it must wait), Unlock and ForceUnlock on a mutex.
func FuzzMutex(f *testing.F) {
	for _, s := range exclusiveSeeds {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, e, mutexKind, data) })
}

// FuzzReentrant is FuzzMutex for the reentrant lock.
func FuzzReentrant(f *testing.F) {
	for _, s := range exclusiveSeeds {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, e, reentrantKind, data) })
}

// FuzzFair is FuzzMutex for the fair lock (whose TryLock never queues).
func FuzzFair(f *testing.F) {
	for _, s := range exclusiveSeeds {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, e, fairKind, data) })
}

// FuzzRWLock runs sequences of TryRLock, RLock, RUnlock, TryLock, Lock,
// Unlock and ForceUnlock on a read/write lock (ops = 7: step byte 7*h + op).
func FuzzRWLock(f *testing.F) {
	for _, s := range [][]byte{
		{0, 0, 7, 3, 10, 2, 9, 3, 5},            // two readers, a writer refused, then it writes
		{4, 3, 0, 5, 2, 6, 0},                   // fencing: write, read inside it, unlock both, force
		{0, 0, 3, 4, 2},                         // a reader asks to write: ErrUpgrade
		{1, 3, 8, 7, 6, 2, 5, 9, 5, 9},          // 3 handles, a force-unlock under a writer
		{0, 0, 0x83, 0x84, 3, 0x80, 0x87, 2, 5}, // ended ctx: a reader's upgrade, re-entries, another reader
	} {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, e, rwlockKind, data) })
}

// FuzzSemaphore runs sequences of TryAcquire, Acquire, Release (each with
// n from the next byte, in [0, permits+1]) and ForceRelease on a
// semaphore; with 4 handles, the fourth is made with one permit more
// (ErrCapacityMismatch).
func FuzzSemaphore(f *testing.F) {
	for _, s := range [][]byte{
		{8, 0, 1, 4, 1, 4, 2, 2, 2},                 // capacity 2: h0 takes 1, h1 takes 1, h1 refused, h0 releases 2
		{16, 0, 3, 1, 4, 2, 0, 2, 9, 3},             // capacity 3: too many, zero, the unlock of more than held
		{2, 0, 1, 13, 1, 3, 0, 2, 1, 3},             // 4 handles: the odd one asks while others hold
		{24, 0, 4, 3, 1, 2, 4, 0, 2, 2, 1},          // a force-release, the release it owes, a new acquire
		{10, 0x80, 1, 0, 2, 0x81, 0, 0x84, 2, 1, 1}, // ended ctx: bad and good counts, the odd handle
	} {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) { run(t, e, semaphoreKind, data) })
}

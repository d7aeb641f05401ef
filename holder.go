package relock

import "time"

// Holder is one owner holding a lock, as anybody can see it: what the lock
// handles' Holders method returns (and what the relock command shows).
type Holder struct {
	// Fingerprint identifies the owner: 8 hex digits of a hash of its
	// token, as its handle's Fingerprint, relock's events and logs show
	// it. Never the token.
	Fingerprint string
	// Metadata is what the owner gave with WithMetadata, or "".
	Metadata string
	// Count is the owner's holds: 1 for a mutex, its re-entries of a
	// reentrant or fair lock, its read plus write holds of an rwlock, its
	// permits of a semaphore.
	Count int
	// Read and Write are an rwlock owner's read and write holds (0 for
	// the other lock types).
	Read, Write int
	// Lease is what is left of the owner's lease at Redis, by the server's
	// clock: its hold expires then unless it is renewed or extended.
	Lease time.Duration
}

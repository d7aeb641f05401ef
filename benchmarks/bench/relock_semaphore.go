package bench

import (
	"context"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/semaphore"
)

// KindSemaphore is relock's semaphore used as a lock: one permit,
// acquired and released one at a time, beside the mutex.
const KindSemaphore = "relock/semaphore"

func init() {
	relockKinds = append(relockKinds,
		RelockKind(KindSemaphore, func(c *relock.Client, name string) Locker { return permit{semaphore.New(c, name, 1)} }))
}

// permit is a one-permit semaphore as a Locker.
type permit struct{ s *semaphore.Semaphore }

func (p permit) Lock(ctx context.Context) error   { return p.s.Acquire(ctx, 1) }
func (p permit) Unlock(ctx context.Context) error { return p.s.Release(ctx, 1) }

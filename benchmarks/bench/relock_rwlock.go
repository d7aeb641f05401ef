package bench

import (
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/rwlock"
)

func init() {
	relockKinds = append(relockKinds,
		RelockKind(KindRWLock, func(c *relock.Client, name string) Locker { return rwlock.New(c, name) }))
}

package bench

import (
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
)

func init() {
	relockKinds = append(relockKinds,
		RelockKind(KindFair, func(c *relock.Client, name string) Locker { return fair.New(c, name) }))
}

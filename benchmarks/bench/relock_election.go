package bench

import (
	"context"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/election"
)

// KindElection is relock's leader election used as a lock: Campaign to
// lead, Resign to step down. It is measured for its server cost only.
const KindElection = "relock/election"

func init() {
	k := RelockKind(KindElection, func(c *relock.Client, name string) Locker { return leadership{election.New(c, name)} })
	k.Only = []string{ScenarioServerCost}
	k.newLock = nil // no cluster kind: it runs no scenario of a cluster kind
	k.Baseline = false
	k.Note = "leader election (Campaign to lead, Resign to step down), defaults; server cost only"
	relockKinds = append(relockKinds, k)
}

// leadership is an election handle as a Locker.
type leadership struct{ e *election.Election }

func (l leadership) Lock(ctx context.Context) error   { return l.e.Campaign(ctx, "") }
func (l leadership) Unlock(ctx context.Context) error { return l.e.Resign(ctx) }

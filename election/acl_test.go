package election_test

import (
	"testing"

	"github.com/relock-go/relock/internal/locktest"
	"github.com/relock-go/relock/internal/redistest"
)

// TestACL runs, as a Redis user whose rights are exactly the ACL rules of
// docs/operations.md (redistest.RunACL; on the Cluster too), the tests
// that together send every command an election sends: campaigns taken at
// once and handed over by a push (FIFO), candidates that give up
// (CampaignCtxEnd), Proclaim, Leader and Observe's pushes and reads
// (ObserveEveryChange), the watchdog's renewals (Renewal), Resume and
// Extend, ForceResign and a loss found by the watchdog, and Run's owner check
// (OwnerCheck). RunACL
// fails the test if Redis refused the user anything on the way.
func TestACL(t *testing.T) {
	redistest.RunACL(t, func(t *testing.T) {
		t.Run("CampaignLeaderResign", TestCampaignLeaderResign)
		t.Run("FIFO", TestFIFO)
		t.Run("CampaignCtxEnd", TestCampaignCtxEnd)
		t.Run("ObserveEveryChange", TestObserveEveryChange)
		t.Run("Renewal", TestRenewal)
		t.Run("Resume", TestResume)
		t.Run("ForceResign", TestForceResign)
		t.Run("ProclaimFindsLoss", TestProclaimFindsLoss)
		t.Run("Do", TestDo)
		t.Run("Run", func(t *testing.T) { locktest.OwnerCheck(t, kind) })
	})
}

package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestScopeForgetsEndedContexts: a hold that lives long and makes a context
// per request (HoldContext with the request's ctx) keeps only those whose
// parent has not ended; they used to be kept until the hold ended (200,000
// calls grew the heap by 60 MB).
func TestScopeForgetsEndedContexts(t *testing.T) {
	s := NewScope()
	for range 1000 {
		parent, cancel := context.WithCancel(context.Background())
		ctx := s.Context(parent)
		cancel()
		<-ctx.Done()
	}
	kept := s.Context(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for s.live() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the scope keeps %d contexts, want 1 (the one whose parent lives)", s.live())
		}
		time.Sleep(time.Millisecond)
	}
	cause := errors.New("lost")
	if !s.End(cause) {
		t.Fatal("End did not end the scope")
	}
	if got := context.Cause(kept); got != cause {
		t.Errorf("the kept context's cause: got %v, want %v", got, cause)
	}
	if got := context.Cause(s.Context(context.Background())); got != cause {
		t.Errorf("a context made after End: cause %v, want %v", got, cause)
	}
	if s.live() != 0 {
		t.Errorf("%d contexts kept after End", s.live())
	}
}

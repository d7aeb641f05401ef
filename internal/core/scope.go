package core

import (
	"context"
	"sync"
)

// Scope is what ends with one hold: the contexts made for it (a handle's
// HoldContext, relock.Do). It ends once, when the hold is lost (the
// contexts' cause is why) or released (cause context.Canceled), and the
// contexts made after that are born cancelled. No goroutine is involved:
// ending the scope cancels its contexts, and a context made from a
// standard parent is cancelled with its parent by the context package
// (which then runs, briefly, the function that forgets it).
// Its methods are safe for concurrent use.
type Scope struct {
	mu      sync.Mutex
	cause   error                // nil while the hold lasts
	cancels map[*scoped]struct{} // the contexts not ended yet
}

// scoped is one context of a Scope, by its cancel function.
type scoped struct{ cancel context.CancelCauseFunc }

// NewScope returns the scope of a new hold.
func NewScope() *Scope { return &Scope{} }

// Context returns a context derived from parent that is cancelled when
// the scope ends, with its cause; or, if it has ended, one cancelled
// already with that cause. The scope forgets the context once it is done
// (its parent ended, say), so that a long hold that makes one per request
// does not keep them all; one made from a parent that never ends is kept
// until the scope ends.
func (s *Scope) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	s.mu.Lock()
	if s.cause != nil {
		s.mu.Unlock()
		cancel(s.cause)
		return ctx
	}
	e := &scoped{cancel: cancel}
	if s.cancels == nil {
		s.cancels = make(map[*scoped]struct{})
	}
	s.cancels[e] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.cancels, e)
		s.mu.Unlock()
	})
	return ctx
}

// live is how many of the scope's contexts are not done yet.
func (s *Scope) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cancels)
}

// End ends the scope with cause (the first cause given wins) and cancels
// its contexts. It reports whether this call ended it; on a nil Scope it
// does nothing.
func (s *Scope) End(cause error) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	if s.cause != nil {
		s.mu.Unlock()
		return false
	}
	s.cause = cause
	cancels := s.cancels
	s.cancels = nil
	s.mu.Unlock()
	for e := range cancels {
		e.cancel(cause)
	}
	return true
}

// Ended returns a context derived from parent, cancelled already with
// cause: the hold context of a handle that holds nothing.
func Ended(parent context.Context, cause error) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	cancel(cause)
	return ctx
}

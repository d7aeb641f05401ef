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
// standard parent is cancelled with its parent by the context package.
// Its methods are safe for concurrent use.
type Scope struct {
	mu      sync.Mutex
	cause   error // nil while the hold lasts
	cancels []context.CancelCauseFunc
}

// NewScope returns the scope of a new hold.
func NewScope() *Scope { return &Scope{} }

// Context returns a context derived from parent that is cancelled when
// the scope ends, with its cause; or, if it has ended, one cancelled
// already with that cause.
func (s *Scope) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		cancel(s.cause)
		return ctx
	}
	s.cancels = append(s.cancels, cancel)
	return ctx
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
	for _, c := range cancels {
		c(cause)
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

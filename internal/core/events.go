package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"
)

// EventType is what happened to a hold (relock.EventType has the same
// values).
type EventType int

// Event types; relock.EventType documents each.
const (
	EventAcquired EventType = iota + 1
	EventReleased
	EventFailed
	EventLost
	EventRenewalFailed
	EventPushUnavailable
)

// Event is what core reports to observers; relock.Event documents the
// fields (the root package copies them into its own type).
type Event struct {
	Type     EventType
	Kind     string
	Name     string
	Mode     string
	Owner    string
	Wait     time.Duration
	Held     time.Duration
	Err      error
	Holds    int
	Attempts int             // EventAcquired, EventFailed: attempts sent to Redis
	Granted  bool            // EventAcquired: handed over by a release (pushed)
	Ctx      context.Context // EventAcquired, EventFailed: the acquire call's ctx
}

// observers calls every observer with ev, in order, from the calling
// goroutine. An observer that panics is recovered from (the lock's state
// was settled before it was called), reported to logger if there is one,
// and does not keep the next observers from seeing ev.
type observers struct {
	fs     []func(Event)
	logger *slog.Logger
}

func (o *observers) emit(ev Event) {
	for _, f := range o.fs {
		o.call(f, ev)
	}
}

func (o *observers) call(f func(Event), ev Event) {
	defer func() {
		if p := recover(); p != nil && o.logger != nil {
			o.logger.Error("relock: observer panicked", "panic", fmt.Sprint(p), "event", ev.Type.String())
		}
	}()
	f(ev)
}

// String returns the event type's name ("acquired", "released", "failed",
// "lost", "renewal-failed").
func (t EventType) String() string {
	switch t {
	case EventAcquired:
		return "acquired"
	case EventReleased:
		return "released"
	case EventFailed:
		return "failed"
	case EventLost:
		return "lost"
	case EventRenewalFailed:
		return "renewal-failed"
	case EventPushUnavailable:
		return "push-unavailable"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Fingerprint is a short, stable name for an owner token that reveals
// nothing of it: the first 8 hex digits of its SHA-256. Logs, events and
// the relock command show owners by it; the token itself is never shown.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

package core

import (
	"context"
	"errors"
	"log/slog"
)

// logEvents returns the observer behind relock.WithLogger: losses, failed
// renewal rounds and acquires that failed for a reason other than their
// ctx ending are logged at Warn, with the lock's kind and name and the
// owner's fingerprint (never the token). Other events are not logged.
func logEvents(l *slog.Logger) func(Event) {
	return func(ev Event) {
		switch ev.Type {
		case EventLost:
			l.Warn("relock: hold lost", "kind", ev.Kind, "name", ev.Name, "owner", ev.Owner,
				"mode", ev.Mode, "held", ev.Held, "err", ev.Err)
		case EventRenewalFailed:
			l.Warn("relock: renewal round failed, retrying", "holds", ev.Holds, "err", ev.Err)
		case EventPushUnavailable:
			l.Warn("relock: wake-ups cannot be pushed, waiters poll (give the Redis user channel rights &relock:*, or use relock.WithPolling)",
				"err", ev.Err)
		case EventFailed:
			if errors.Is(ev.Err, context.Canceled) || errors.Is(ev.Err, context.DeadlineExceeded) {
				return
			}
			l.Warn("relock: acquire failed", "kind", ev.Kind, "name", ev.Name, "owner", ev.Owner,
				"mode", ev.Mode, "waited", ev.Wait, "err", ev.Err)
		}
	}
}

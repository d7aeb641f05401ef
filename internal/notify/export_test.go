package notify

import "time"

// IsRefusal is isRefusal, for the external tests.
var IsRefusal = isRefusal

// SetLinger sets how long h's channels linger (Linger), before its first
// Subscribe.
func SetLinger(h *Hub, d time.Duration) { h.linger = d }

package relock

import "github.com/relock-go/relock/internal/core"

// Script is a Lua script that a lock handle runs atomically with a check
// that it still holds its lock: a write guarded by the hold. Make it once
// with NewScript (a package variable) and run it with a handle's Run
// method (mutex.Mutex.Run, ...).
//
// Without it, a holder that was paused past its lease (a long GC, a
// stopped VM) still writes when it wakes up, after another owner took the
// lock: the read-check-write of the stock example oversells. With it, the
// owner check and the write are one Redis script: a stale holder's write
// is refused (the error matches ErrNotHeld and ErrLockGone) and the new
// owner's runs. It protects writes to the same Redis only; for other
// resources, pass a fencing token (WithFencing) and have them check it.
//
// The script sees only its own keys and arguments in KEYS and ARGV, and
// its reply is the Run's. On a Redis Cluster every key it touches must be
// in the lock's slot: put the lock's hash tag in their names (the key
// "stock:{sku-1}" is in the slot of the lock named "sku-1"); Run refuses
// other keys with an error matching ErrInvalidOption. go-redis may send a
// script again when its reply timed out (MaxRetries): write it so that a
// second run does no harm, or give the Client's Redis client MaxRetries
// -1. A Script is safe for concurrent use.
type Script struct{ g *core.Guarded }

// NewScript returns the Script of the Lua source src, which is run as
// the body of an EVAL (it may return a value; KEYS and ARGV are its own).
func NewScript(src string) *Script { return &Script{g: core.NewGuarded(src)} }

func init() {
	core.RegisterGuarded(func(v any) *core.Guarded {
		if s, ok := v.(*Script); ok && s != nil {
			return s.g
		}
		return nil
	})
}

package lockerr

import "errors"

// JoinEnd joins the error of a function run under a hold (relock.Do,
// election's Do) with that of the hold's end (Unlock, Resign; end names
// it in the message): nil if both are nil, one of them when it wraps the
// other (fn returned its context's cause, the loss, which the end's error
// wraps with the lock's name: the loss is said once), else both, which
// errors.Is and errors.As see.
func JoinEnd(fnErr, endErr error, end string) error {
	switch {
	case endErr == nil || errors.Is(fnErr, endErr):
		return fnErr
	case fnErr == nil || errors.Is(endErr, fnErr):
		return endErr
	}
	return &joined{fnErr, endErr, end}
}

// joined is errors.Join of two errors, with a message saying which is
// which.
type joined struct {
	fn, end error
	name    string
}

func (e *joined) Error() string {
	return e.fn.Error() + "; and " + e.name + ": " + e.end.Error()
}

func (e *joined) Unwrap() []error { return []error{e.fn, e.end} }

package core

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// IsLocked reports whether anyone holds the lock (one EXISTS).
func (o *Owner) IsLocked(ctx context.Context) (bool, error) {
	if err := o.Check(); err != nil {
		return false, o.errorf("is-locked", err)
	}
	n, err := o.E.RDB.Exists(ctx, o.Keys.Lock).Result()
	if err != nil {
		return false, o.errorf("is-locked", err)
	}
	return n == 1, nil
}

// RemainingLease returns how long the lock has left before it expires
// unless renewed (one PTTL), or 0 if it is not locked.
func (o *Owner) RemainingLease(ctx context.Context) (time.Duration, error) {
	if err := o.Check(); err != nil {
		return 0, o.errorf("ttl", err)
	}
	d, err := o.E.RDB.PTTL(ctx, o.Keys.Lock).Result()
	if err != nil {
		return 0, o.errorf("ttl", err)
	}
	if d < 0 {
		return 0, nil
	}
	return d, nil
}

// HashCount returns this owner's count in the lock's hash (one HGET), 0
// when it has none.
func (o *Owner) HashCount(ctx context.Context, field string) (int, error) {
	if err := o.Check(); err != nil {
		return 0, o.errorf("hold-count", err)
	}
	n, err := o.E.RDB.HGet(ctx, o.Keys.Lock, field).Int()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, o.errorf("hold-count", err)
	}
	return n, nil
}

// Errorf is errorf, for the lock packages.
func (o *Owner) Errorf(op string, err error) error { return o.errorf(op, err) }

// errorf wraps err with the lock's kind, the operation and the lock's name:
// `mutex: lock "orders:42": ...`.
func (o *Owner) errorf(op string, err error) error {
	return fmt.Errorf("%s: %s %q: %w", o.Kind, op, o.Name, err)
}

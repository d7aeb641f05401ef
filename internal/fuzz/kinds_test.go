package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/alicebob/miniredis/v2"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fair"
	"github.com/relock-go/relock/mutex"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

func keyOf(kind string) func(name string) string {
	return func(name string) string { return "relock:" + kind + ":{" + name + "}" }
}

// exclusive adapts a mutex, reentrant or fair lock.
type exclusive struct {
	l interface {
		Lock(ctx context.Context) error
		TryLock(ctx context.Context) (bool, error)
		Unlock(ctx context.Context) error
		Held() bool
		Fence() int64
	}
}

func (x exclusive) Acquire(ctx context.Context, _, _ int, block bool) (bool, error) {
	if block {
		err := x.l.Lock(ctx)
		return err == nil, err
	}
	return x.l.TryLock(ctx)
}

func (x exclusive) Release(ctx context.Context, _, _ int) error { return x.l.Unlock(ctx) }

func (x exclusive) Held(int) int { return b2i(x.l.Held()) }

func (x exclusive) Fence() int64 { return x.l.Fence() }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hashCounts reads a reentrant or fair lock's hash: owner token -> count.
func hashCounts(m *miniredis.Miniredis, key string) (map[string][2]int, error) {
	out := map[string][2]int{}
	if !m.Exists(key) {
		return out, nil
	}
	fields, err := m.HKeys(key)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if f == "fence" {
			continue
		}
		n, err := strconv.Atoi(m.HGet(key, f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("field %s = %q", f, m.HGet(key, f))
		}
		out[f] = [2]int{n}
	}
	return out, nil
}

var (
	mutexKind = kind{
		name: "mutex", classes: 1, fenced: units, key: keyOf("mutex"),
		open: func(c *relock.Client, name string, _ int, opts ...relock.LockOption) handle {
			return exclusive{mutex.New(c, name, opts...)}
		},
		force: func(ctx context.Context, c *relock.Client, name string, _ int) (bool, error) {
			return mutex.New(c, name).ForceUnlock(ctx)
		},
		counts: func(m *miniredis.Miniredis, name string) (map[string][2]int, error) {
			v, err := m.Get(keyOf("mutex")(name))
			if errors.Is(err, miniredis.ErrKeyNotFound) {
				return map[string][2]int{}, nil
			}
			if err != nil {
				return nil, err
			}
			tok, _, _ := strings.Cut(v, ":")
			return map[string][2]int{tok: {1}}, nil
		},
	}
	reentrantKind = kind{
		name: "reentrant", classes: 1, reentrant: true, fenced: units, key: keyOf("reentrant"),
		open: func(c *relock.Client, name string, _ int, opts ...relock.LockOption) handle {
			return exclusive{reentrant.New(c, name, opts...)}
		},
		force: func(ctx context.Context, c *relock.Client, name string, _ int) (bool, error) {
			return reentrant.New(c, name).ForceUnlock(ctx)
		},
		counts: func(m *miniredis.Miniredis, name string) (map[string][2]int, error) {
			return hashCounts(m, keyOf("reentrant")(name))
		},
	}
	fairKind = kind{
		name: "fair", classes: 1, reentrant: true, fenced: units, key: keyOf("fair"),
		open: func(c *relock.Client, name string, _ int, opts ...relock.LockOption) handle {
			return exclusive{fair.New(c, name, opts...)}
		},
		force: func(ctx context.Context, c *relock.Client, name string, _ int) (bool, error) {
			return fair.New(c, name).ForceUnlock(ctx)
		},
		counts: func(m *miniredis.Miniredis, name string) (map[string][2]int, error) {
			return hashCounts(m, keyOf("fair")(name))
		},
	}
	rwlockKind = kind{
		name: "rwlock", classes: 2, reentrant: true, fenced: write, key: keyOf("rwlock"),
		open: func(c *relock.Client, name string, _ int, opts ...relock.LockOption) handle {
			return rw{rwlock.New(c, name, opts...)}
		},
		force: func(ctx context.Context, c *relock.Client, name string, _ int) (bool, error) {
			return rwlock.New(c, name).ForceUnlock(ctx)
		},
		counts: rwCounts,
	}
	semaphoreKind = kind{
		name: "semaphore", classes: 1, reentrant: true, fenced: -1, semaphore: true, key: keyOf("semaphore"),
		open: func(c *relock.Client, name string, permits int, opts ...relock.LockOption) handle {
			return sem{semaphore.New(c, name, permits, opts...)}
		},
		force: func(ctx context.Context, c *relock.Client, name string, permits int) (bool, error) {
			return semaphore.New(c, name, permits).ForceRelease(ctx)
		},
		counts: semCounts,
	}
)

// rw adapts a read/write lock: class read is RLock..., write Lock...
type rw struct{ l *rwlock.RWMutex }

func (x rw) Acquire(ctx context.Context, class, _ int, block bool) (bool, error) {
	switch {
	case class == read && block:
		err := x.l.RLock(ctx)
		return err == nil, err
	case class == read:
		return x.l.TryRLock(ctx)
	case block:
		err := x.l.Lock(ctx)
		return err == nil, err
	}
	return x.l.TryLock(ctx)
}

func (x rw) Release(ctx context.Context, class, _ int) error {
	if class == read {
		return x.l.RUnlock(ctx)
	}
	return x.l.Unlock(ctx)
}

func (x rw) Held(class int) int {
	if class == read {
		return b2i(x.l.RHeld())
	}
	return b2i(x.l.Held())
}

func (x rw) Fence() int64 { return x.l.Fence() }

// rwCounts reads a read/write lock's hash ("<tok>:r", "<tok>:w", "writer",
// "fence") and checks it against its owners' sorted set (absent when the
// lock is solo: one owner, see rwlock_common.lua).
func rwCounts(m *miniredis.Miniredis, name string) (map[string][2]int, error) {
	key := keyOf("rwlock")(name)
	out := map[string][2]int{}
	if !m.Exists(key) {
		if m.Exists(key + ":owners") {
			return nil, errors.New("owners without a lock")
		}
		return out, nil
	}
	fields, err := m.HKeys(key)
	if err != nil {
		return nil, err
	}
	writer := ""
	for _, f := range fields {
		v := m.HGet(key, f)
		switch {
		case f == "writer":
			writer = v
			continue
		case f == "fence":
			continue
		}
		tok, class, ok := strings.Cut(f, ":")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 1 || (class != "r" && class != "w") {
			return nil, fmt.Errorf("field %s = %q", f, v)
		}
		c := out[tok]
		c[b2i(class == "w")] = n
		out[tok] = c
	}
	for tok, c := range out {
		if (c[write] > 0) != (tok == writer) {
			return nil, fmt.Errorf("writer %q, counts %v", writer, out)
		}
	}
	if writer != "" && out[writer][write] == 0 {
		return nil, fmt.Errorf("writer %q holds no write", writer)
	}
	owners, _ := m.ZMembers(key + ":owners")
	if len(owners) == 0 && len(out) == 1 {
		return out, nil // solo: its one owner's holds expire with the hash
	}
	if len(owners) != len(out) {
		return nil, fmt.Errorf("owners %v, counts %v", owners, out)
	}
	for _, tok := range owners {
		if _, ok := out[tok]; !ok {
			return nil, fmt.Errorf("owner %s without holds", tok)
		}
	}
	return out, nil
}

// sem adapts a semaphore.
type sem struct{ s *semaphore.Semaphore }

func (x sem) Acquire(ctx context.Context, _, n int, block bool) (bool, error) {
	if block {
		err := x.s.Acquire(ctx, n)
		return err == nil, err
	}
	return x.s.TryAcquire(ctx, n)
}

func (x sem) Release(ctx context.Context, _, n int) error { return x.s.Release(ctx, n) }

func (x sem) Held(int) int { return x.s.Held() }

func (x sem) Fence() int64 { return 0 }

// semCounts reads a semaphore's hash ("permits", "used", "<tok>") and
// checks that "used" is the sum of the owners' permits.
func semCounts(m *miniredis.Miniredis, name string) (map[string][2]int, error) {
	key := keyOf("semaphore")(name)
	out := map[string][2]int{}
	if !m.Exists(key) {
		return out, nil
	}
	fields, err := m.HKeys(key)
	if err != nil {
		return nil, err
	}
	used, sum := 0, 0
	for _, f := range fields {
		n, err := strconv.Atoi(m.HGet(key, f))
		if err != nil {
			return nil, fmt.Errorf("field %s = %q", f, m.HGet(key, f))
		}
		switch f {
		case "permits":
		case "used":
			used = n
		default:
			if n < 1 {
				return nil, fmt.Errorf("owner %s holds %d", f, n)
			}
			out[f] = [2]int{n}
			sum += n
		}
	}
	if used != sum {
		return nil, fmt.Errorf("used %d, owners hold %d (%v)", used, sum, out)
	}
	return out, nil
}

package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/shard"
	"github.com/relock-go/relock/internal/watchdog"
)

// Guarded is a caller's Lua script that a handle runs only while it holds
// its lock (relock.Script): its source with, for each kind of hold, a
// prologue that checks the owner at Redis, in the same script call.
type Guarded struct {
	src string

	mu     sync.Mutex
	byKind map[string]*redis.Script
}

// NewGuarded returns the guarded form of src.
func NewGuarded(src string) *Guarded { return &Guarded{src: src, byKind: map[string]*redis.Script{}} }

// guardedOf maps a *relock.Script to its Guarded; set by the root package.
var guardedOf func(any) *Guarded

// RegisterGuarded is called once by the root package's init so that lock
// packages can reach a Script's Guarded without it being exported.
func RegisterGuarded(f func(any) *Guarded) { guardedOf = f }

// GuardedOf returns s's Guarded, or nil for a nil Script.
func GuardedOf(s any) *Guarded {
	if guardedOf == nil || s == nil {
		return nil
	}
	return guardedOf(s)
}

// notHeldReply is the error reply of the prologue when the owner does not
// hold the lock (any more) at Redis.
const notHeldReply = "RELOCK_NOT_HELD lock not held by this owner"

// The prologue pops what the handle appended to KEYS and ARGV (see
// Holder.RunGuarded), so that the caller's script sees only its own, and
// refuses to run it unless the owner still holds the lock. It runs in its
// own block: its locals are not the caller's.
const prologue = `do
  local n = tonumber(table.remove(ARGV))
  local tok = table.remove(ARGV)
  local mine = {}
  for i = n, 1, -1 do mine[i] = table.remove(KEYS) end
  local lk, held = mine[1], false
%s
  if not held then return redis.error_reply('` + notHeldReply + `') end
end
`

// checks are the owner checks of each kind of hold (watchdog.Kind...):
// lk the lock's key, mine[2] the owners' expiries ("w", "s"), tok the
// owner's token.
var checks = map[string]string{
	watchdog.KindString: `  local v = redis.call('GET', lk)
  held = v ~= false and (v == tok or string.sub(v, 1, #tok + 1) == tok .. ':' or string.sub(v, 1, #tok + 1) == tok .. '|')`,
	watchdog.KindHash: `  held = redis.call('HEXISTS', lk, tok) == 1`,
	// A write guarded by an rwlock needs its write lock. A solo lock (no
	// owners' set: see rwlock_common.lua) is its one owner's while the
	// hash lives.
	watchdog.KindRW: `  if redis.call('HEXISTS', lk, tok .. ':w') == 1 then
` + liveOwner + `
  end`,
	watchdog.KindSemaphore: `  if tonumber(redis.call('HGET', lk, tok) or 0) > 0 then
` + liveOwner + `
  end`,
}

// liveOwner sets held when owner tok's expiry (an rwlock's or a
// semaphore's) lies ahead, or it is a solo lock's owner.
const liveOwner = `    local e = redis.call('ZSCORE', mine[2], tok)
    if e then
      local t = redis.call('TIME')
      held = tonumber(e) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    else
      held = redis.call('EXISTS', mine[2]) == 0
    end`

// script returns g's script for holds of kind.
func (g *Guarded) script(kind string) *redis.Script {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.byKind[kind]
	if s == nil {
		s = redis.NewScript(fmt.Sprintf(prologue, checks[kind]) + g.src)
		g.byKind[kind] = s
	}
	return s
}

// RunGuarded runs g with keys and args, atomically with a check that this
// handle still holds its lock at Redis (for an rwlock: its write lock; for
// a semaphore: at least one permit). When it does not, the script does not
// run and the command's error matches lockerr.NotHeld (and lockerr.Gone:
// the hold is then lost, Lost fires). A handle that knows it holds nothing
// (never locked, released, lost, past its local deadline) sends nothing.
// On a Redis Cluster every key must be in the lock's slot, else the error
// matches lockerr.InvalidOption and nothing is sent. Like every script,
// go-redis may send it again after a reply that timed out.
func (h *Holder) RunGuarded(ctx context.Context, op string, g *Guarded, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx) // no arguments: see the end
	fail := func(err error) *redis.Cmd {
		cmd.SetErr(h.errorf(op, err))
		return cmd
	}
	if g == nil {
		return fail(fmt.Errorf("%w: nil script", lockerr.InvalidOption))
	}
	if err := h.Check(); err != nil {
		return fail(err)
	}
	if h.E.sharded {
		slot := shard.Slot(h.Keys.Lock)
		for _, k := range keys {
			if shard.Slot(k) != slot {
				return fail(fmt.Errorf("%w: key %q is in Cluster slot %d, the lock in slot %d: use the lock's hash tag {%s} in its name",
					lockerr.InvalidOption, k, shard.Slot(k), slot, shard.Tag(h.Keys.Lock)))
			}
		}
	}
	h.mu.Lock()
	defer h.unlock()
	h.goneLocked() // past its local deadline (this process was paused, say): lost, as Held says
	switch {
	case h.lost != nil:
		return fail(h.lost)
	case h.hold == nil || h.held.Zero() || h.ending:
		return fail(lockerr.NotHeld)
	case h.watchKind == watchdog.KindRW && h.held[Write] == 0:
		return fail(fmt.Errorf("%w: a guarded script of a read/write lock needs its write lock", lockerr.NotHeld))
	}
	// The caller's keys, then the lock's keys and, on a Cluster, the
	// never-created key of its slot (a migrating slot then refuses the
	// script before it runs: see Keys.Absent), which the prologue pops.
	all := append(keys[:len(keys):len(keys)], h.Keys.Lock)
	if h.watchAux != "" {
		all = append(all, h.watchAux)
	}
	if h.E.sharded {
		all = append(all, h.Keys.Absent())
	}
	mine := len(all) - len(keys)
	argv := append(args[:len(args):len(args)], h.Token, strconv.Itoa(mine))
	h.sent++
	gs := g.script(h.watchKind)
	res := h.send(ctx, h.scripter(), h.conn != nil, func(ctx context.Context, via scripts.Caller) *redis.Cmd {
		return gs.Run(ctx, via, all, argv...)
	})
	if err := res.Err(); err != nil && isNotHeldReply(err) {
		return fail(h.loseLocked(lockerr.Loss(lockerr.Gone, "lock gone, expired or taken by another owner")))
	}
	// The caller gets the reply and error in a command of its own: res's
	// arguments hold the owner token, which its String would print.
	cmd.SetVal(res.Val())
	cmd.SetErr(res.Err())
	return cmd
}

func isNotHeldReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), notHeldReply)
}

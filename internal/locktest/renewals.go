package locktest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/scripts"
)

// renewal reports whether cmd is a watchdog renewal (or claim) round's
// call of the renew script, in any of its forms (FCALL, EVALSHA, EVAL).
// On a single server a round's calls go in one pipeline; on a Cluster
// each goes as a command of its own (see shard.Pipelined), as lock calls
// do: a hook that must tell renewals apart looks at the command.
func renewal(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	first, ok := args[1].(string)
	if !ok {
		return false
	}
	switch strings.ToLower(cmd.Name()) {
	case "fcall", "fcall_ro":
		return first == scripts.Renew.Function(false) || first == scripts.Renew.Function(true)
	case "evalsha", "evalsha_ro":
		return first == scripts.Renew.Eval(false).Hash() || first == scripts.Renew.Eval(true).Hash()
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(first))
		h := hex.EncodeToString(sum[:])
		return h == scripts.Renew.Eval(false).Hash() || h == scripts.Renew.Eval(true).Hash()
	}
	return false
}

// anyRenewal reports whether one of cmds is a renewal.
func anyRenewal(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if renewal(c) {
			return true
		}
	}
	return false
}

// lateReply is a go-redis hook that, while armed (hold), keeps the reply
// of a renewal command (an Extend's) from its caller until a channel is
// closed (a hold's Lost, say), at most 5 s: Redis has applied it, and its
// sender learns it late.
type lateReply struct {
	// match, if set, picks the commands held back instead of renewals.
	match func(redis.Cmder) bool

	// holding, if set, is closed when the hook first holds a reply back.
	holding chan struct{}
	once    sync.Once

	mu    sync.Mutex
	until <-chan struct{}
}

// hold arms the hook until ch is closed; nil disarms it.
func (l *lateReply) hold(ch <-chan struct{}) {
	l.mu.Lock()
	l.until = ch
	l.mu.Unlock()
}

func (l *lateReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *lateReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		l.mu.Lock()
		until := l.until
		l.mu.Unlock()
		// Only a reply that Redis ran the script for: a refusal first
		// (NOSCRIPT, a function library not loaded yet) is resent at once.
		if until != nil && err == nil && l.matches(cmd) {
			if l.holding != nil {
				l.once.Do(func() { close(l.holding) })
			}
			select {
			case <-until:
			case <-time.After(5 * time.Second):
			}
		}
		return err
	}
}

func (l *lateReply) matches(cmd redis.Cmder) bool {
	if l.match != nil {
		return l.match(cmd)
	}
	return renewal(cmd)
}

func (l *lateReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// HeldRenewal is a go-redis hook that, once armed (Arm), holds back the
// first renewal sent (a pipeline of renewals on a single server, a renewal
// command on a Cluster) before it reaches Redis, until Release: a renewal
// on its way.
type HeldRenewal struct {
	armed   atomic.Bool
	holding chan struct{}
	release chan struct{}
	landed  chan struct{}
}

// NewHeldRenewal returns a HeldRenewal, not armed.
func NewHeldRenewal() *HeldRenewal {
	return &HeldRenewal{holding: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
}

// Arm makes the hook hold back the next renewal.
func (l *HeldRenewal) Arm() { l.armed.Store(true) }

// Holding is closed once the hook holds a renewal back.
func (l *HeldRenewal) Holding() <-chan struct{} { return l.holding }

// Release sends the renewal held back (once).
func (l *HeldRenewal) Release() { close(l.release) }

// Landed is closed once the renewal held back has its reply.
func (l *HeldRenewal) Landed() <-chan struct{} { return l.landed }

// send sends (calls send) a command or pipeline that is a renewal or not.
func (l *HeldRenewal) send(renewing bool, send func() error) error {
	if !renewing || !l.armed.CompareAndSwap(true, false) {
		return send()
	}
	close(l.holding)
	<-l.release
	defer close(l.landed)
	return send()
}

// DialHook implements redis.Hook.
func (l *HeldRenewal) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (l *HeldRenewal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return l.send(renewal(cmd), func() error { return next(ctx, cmd) })
	}
}

// ProcessPipelineHook implements redis.Hook.
func (l *HeldRenewal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return l.send(anyRenewal(cmds), func() error { return next(ctx, cmds) })
	}
}

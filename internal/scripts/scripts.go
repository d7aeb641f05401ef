// Package scripts holds relock's Lua scripts, one file per operation, each
// opening with a header that states its KEYS, ARGV and reply, and the
// helper files (functions) they share.
//
// Every key a script touches shares one lock's hash tag, so they live in
// one cluster slot: it gets them through KEYS, or (the hot scripts, see
// deriving) builds them from KEYS[1]; every value comes through ARGV.
// Scripts that change a lock are idempotent per request id: go-redis resends
// a command whose reply timed out, and a second run must answer as the first.
//
// A Script runs in one of two forms (see Runner): as a function of relock's
// function library (FCALL; the library is loaded once per server with
// FUNCTION LOAD, so its helpers are defined once, not on every call), where
// the server has functions (Redis 7); or as a script (EVALSHA, EVAL on
// NOSCRIPT), whose source is its body after just the helper functions it
// uses.
package scripts

import (
	"embed"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

func file(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("relock: missing script " + name) // a build error, not input
	}
	return string(b)
}

// Script is one of relock's Lua scripts.
type Script struct {
	name string   // its file, e.g. "mutex_acquire"
	body string   // the file, after its keys' prologue (see derive)
	uses []string // the helper files it may call, in order

	eval, twin *redis.Script // the script form; twin publishes with SPUBLISH
	fn, fnTwin string        // its function's name and its twin's (see Function)
}

// define returns the script of file name, which calls the helpers of the
// files uses, and adds it to the library.
func define(name string, uses ...string) *Script { return deriving(name, "", uses...) }

// deriving is define for a script whose caller passes only the lock's
// main key (and, on a Cluster, the never-created key of its slot): keys
// names the keys that the script's body reads as KEYS[2], KEYS[3]...,
// comma-separated, each the main key with a suffix, or ":r:<n>" for the
// record of the request whose id is ARGV[n] (see RequestRecord). They
// share the main key's {hash tag}, so its slot: Redis lets a script (and a
// function) reach the keys of its declared keys' slot, and every parameter
// costs a call about as much as a command inside it. (On a Cluster the
// slot's declared never-created key still makes a migrating slot refuse
// the script before it runs.) The body's line "-- @keys" is where they
// are built (after a fast path that needs few of them), else its top.
func deriving(name, keys string, uses ...string) *Script {
	body := file(name)
	if keys != "" {
		if strings.Contains(body, keysMarker) {
			body = strings.Replace(body, keysMarker, derive(keys), 1)
		} else {
			body = derive(keys) + body
		}
	}
	s := &Script{name: name, body: body, uses: uses}
	src := prelude(uses, s.body) + s.body
	s.eval, s.twin = redis.NewScript(src), redis.NewScript(src)
	if strings.Contains(src, publishCall) {
		s.twin = redis.NewScript(spublish + strings.ReplaceAll(src, publishCall, "spublish("))
	}
	all = append(all, s)
	return s
}

// keysMarker is the line of a script's body where deriving builds its keys.
const keysMarker = "-- @keys\n"

// derive returns the statement that sets KEYS[2], KEYS[3]... to the keys
// named by suffixes (see deriving).
func derive(suffixes string) string {
	var lhs, rhs []string
	for i, suf := range strings.Split(suffixes, ",") {
		lhs = append(lhs, "KEYS["+strconv.Itoa(i+2)+"]")
		if n, ok := strings.CutPrefix(suf, ":r:"); ok {
			rhs = append(rhs, "KEYS[1] .. ':r:' .. ARGV[1] .. ':' .. ARGV["+n+"]")
		} else {
			rhs = append(rhs, "KEYS[1] .. '"+suf+"'")
		}
	}
	return "-- The lock's other keys, built from its main key (see scripts.deriving).\n" +
		strings.Join(lhs, ", ") + " = " + strings.Join(rhs, ", ") + "\n"
}

// RequestRecord is the key of the request record of request id of owner
// tok, for the lock whose main key is lock: the scripts of the lock types
// keep one record per request (see record.lua), which the owner deletes
// once it has the reply (see core.Sweeper).
func RequestRecord(lock, tok, id string) string { return lock + ":r:" + tok + ":" + id }

// The keys that the hot scripts of each lock type build (see deriving),
// with the request id in ARGV[n] (":r:n").
const (
	exclusiveKeys = ":fence,:r:3,:queue,:timeouts"                  // KEYS[2..5] of an acquire
	exclusiveRel  = ":fence,:r:2,:queue,:timeouts"                  // of a release, abort or leave
	rwKeys        = ":fence,:r:3,:owners,:queue,:timeouts,:readers" // KEYS[2..7] of an acquire
	rwRel         = ":fence,:r:2,:owners,:queue,:timeouts,:readers"
	semKeys       = ":r:3,:owners,:queue,:timeouts" // KEYS[2..5] of an acquire
	semRel        = ":r:2,:owners,:queue,:timeouts"
)

// all is every script, in the order defined, for the library.
var all []*Script

// Name is the script's file name (without .lua).
func (s *Script) Name() string { return s.name }

// Eval returns the script form of s; on a Redis Cluster (sharded) its
// twin, which publishes wake-ups with SPUBLISH (sharded pub/sub: only the
// node of the lock's slot hears it, not every node of the cluster).
func (s *Script) Eval(sharded bool) *redis.Script {
	if sharded {
		return s.twin
	}
	return s.eval
}

// publishCall is how scripts publish; a Cluster's twin replaces it.
const publishCall = "redis.call('PUBLISH', "

// spublish is the twin's publish: SPUBLISH on the node that runs the
// script (the channel shares the lock's hash tag, so its slot); PUBLISH
// where SPUBLISH is unknown (Redis before 7), which the hub then cannot
// hear: its waiters poll (see notify).
const spublish = `local function spublish(channel, msg)
  local r = redis.pcall('SPUBLISH', channel, msg)
  if type(r) == 'table' and r.err then redis.call('PUBLISH', channel, msg) end
end
`

// Helper files: the functions (and constants) scripts share.
const (
	record    = "record"
	clock     = "clock"
	queue     = "queue"
	handoff   = "handoff"
	fairHelp  = "fair_common"
	rwHelp    = "rwlock_common"
	semHelp   = "semaphore_common"
	electHelp = "election_common"
	force     = "force"
)

// helperOrder is every helper file, in the order their definitions must
// come (a helper may call those defined before it).
var helperOrder = []string{record, clock, queue, handoff, fairHelp, rwHelp, semHelp, electHelp, force}

// block is one top-level definition of a helper file: a local function
// (from its "local function" line to the "end" that closes it at column
// 0) or a one-line local constant.
type block struct {
	name, src string
}

// blocks are the definitions of every helper file, in helperOrder.
var blocks = parseHelpers()

var (
	funcStart  = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	constStart = regexp.MustCompile(`^local ([A-Za-z_][A-Za-z0-9_]*) = `)
)

func parseHelpers() map[string][]block {
	out := map[string][]block{}
	for _, f := range helperOrder {
		lines := strings.SplitAfter(file(f), "\n")
		for i := 0; i < len(lines); i++ {
			if m := funcStart.FindStringSubmatch(lines[i]); m != nil {
				var b strings.Builder
				for ; i < len(lines); i++ {
					b.WriteString(lines[i])
					if strings.TrimRight(lines[i], "\n") == "end" {
						break
					}
				}
				out[f] = append(out[f], block{name: m[1], src: b.String()})
			} else if m := constStart.FindStringSubmatch(lines[i]); m != nil {
				out[f] = append(out[f], block{name: m[1], src: lines[i]})
			}
		}
	}
	return out
}

var ident = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// prelude returns the definitions of the helper files uses that body
// needs, directly or through the helpers it calls, in their order: a
// script defines only the helpers it may call (each definition costs
// Redis a closure on every call of the script form).
func prelude(uses []string, body string) string {
	var defs []block
	for _, f := range uses {
		defs = append(defs, blocks[f]...)
	}
	need := map[string]bool{}
	var mark func(src string)
	byName := map[string]block{}
	for _, d := range defs {
		byName[d.name] = d
	}
	mark = func(src string) {
		for _, id := range ident.FindAllString(src, -1) {
			if d, ok := byName[id]; ok && !need[id] {
				need[id] = true
				mark(d.src)
			}
		}
	}
	mark(body)
	var b strings.Builder
	for _, d := range defs {
		if need[d.name] {
			b.WriteString(d.src)
		}
	}
	return b.String()
}

// Scripts of the exclusive locks: the mutex and the reentrant lock hand
// themselves over to a starving waiter (handoff.lua), the fair lock to the
// head of its queue (fair_common.lua).
var (
	MutexAcquire     = deriving("mutex_acquire", exclusiveKeys, record, clock, queue, handoff)
	MutexRelease     = define("mutex_release", record, clock, queue, handoff)
	MutexAbort       = deriving("mutex_abort", exclusiveRel, record, clock, queue, handoff)
	MutexLeave       = deriving("mutex_leave", exclusiveRel, record, clock, queue, handoff)
	ReentrantAcquire = deriving("reentrant_acquire", exclusiveKeys, record, clock, queue, handoff)
	ReentrantRelease = define("reentrant_release", record, clock, queue, handoff)
	ReentrantAbort   = deriving("reentrant_abort", exclusiveRel, record, clock, queue, handoff)
	ReentrantLeave   = deriving("reentrant_leave", exclusiveRel, record, clock, queue, handoff)
	FairAcquire      = deriving("fair_acquire", exclusiveKeys, record, clock, queue, fairHelp)
	FairRelease      = define("fair_release", record, clock, queue, fairHelp)
	FairAbort        = deriving("fair_abort", exclusiveRel, record, clock, queue, fairHelp)
	FairLeave        = deriving("fair_leave", exclusiveRel, record, clock, queue, fairHelp)
	// ForceUnlock is the force-unlock of a mutex and a reentrant lock;
	// FairForceUnlock wakes the fair queue's head, not the lock's channel.
	ForceUnlock     = define("force_unlock", force)
	FairForceUnlock = define("fair_force_unlock", record, clock, queue, fairHelp, force)
)

// Scripts of every lock type: the watchdog's renewals (and Extend), and
// Resume.
var (
	Renew  = define("renew", clock)
	Resume = define("resume", clock)
)

// The read/write-lock scripts.
var (
	RWAcquire     = deriving("rwlock_acquire", rwKeys, record, clock, queue, rwHelp)
	RWRelease     = deriving("rwlock_release", rwRel, record, clock, queue, rwHelp)
	RWAbort       = deriving("rwlock_abort", rwRel, record, clock, queue, rwHelp)
	RWLeave       = deriving("rwlock_leave", rwRel, record, clock, queue, rwHelp)
	RWCount       = define("rwlock_count", clock)
	RWForceUnlock = define("rwlock_force_unlock", record, clock, queue, rwHelp, force)
)

// The semaphore scripts.
var (
	SemAcquire      = deriving("semaphore_acquire", semKeys, record, clock, queue, semHelp)
	SemRelease      = deriving("semaphore_release", semRel, record, clock, queue, semHelp)
	SemAbort        = deriving("semaphore_abort", semRel, record, clock, queue, semHelp)
	SemLeave        = deriving("semaphore_leave", semRel, record, clock, queue, semHelp)
	SemAvailable    = define("semaphore_available", record, clock, queue, semHelp)
	SemForceRelease = define("semaphore_force_release", record, clock, queue, semHelp, force)
)

// The election scripts.
var (
	ElectionCampaign    = define("election_campaign", record, clock, queue, electHelp)
	ElectionResign      = define("election_resign", record, clock, queue, electHelp)
	ElectionAbort       = define("election_abort", record, clock, queue, electHelp)
	ElectionLeave       = define("election_leave", record, clock, queue, electHelp)
	ElectionProclaim    = define("election_proclaim", record, clock, queue, electHelp)
	ElectionObserve     = define("election_observe", record, clock, queue, electHelp)
	ElectionForceResign = define("election_force_resign", record, clock, queue, electHelp, force)
)

// The count-down latch scripts.
var (
	LatchSet       = define("latch_set", record)
	LatchCountDown = define("latch_count_down", record)
)

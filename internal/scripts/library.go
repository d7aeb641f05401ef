package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
)

// The function library holds every Script twice: as function
// "relock_<version>_<name>", which publishes wake-ups with PUBLISH, and
// as "relock_<version>_<name>_s", its twin for a Redis Cluster, which
// publishes with SPUBLISH. Every helper is defined once, when the library
// is loaded. <version> is a hash of the library's source, so that two
// versions of relock can share a server without replacing each other's
// functions.
var library struct {
	once     sync.Once
	name     string
	src      string
	version  string
	fnPrefix string
}

// twinSuffix ends the name of a script's function that publishes with
// SPUBLISH (a Cluster's), after the name of its PUBLISH twin.
const twinSuffix = "_s"

func buildLibrary() {
	var b strings.Builder
	b.WriteString(spublish)
	// Each function sets, before its body runs, the KEYS and ARGV that
	// its body and helpers read (a script's globals), how they publish,
	// and forgets the previous call's time (clock_us, clock.lua).
	b.WriteString(`local KEYS, ARGV = {}, {}
local cluster = false
local function publish(channel, msg)
  if cluster then spublish(channel, msg) else redis.call('PUBLISH', channel, msg) end
end
`)
	for _, f := range helperOrder {
		for _, d := range blocks[f] {
			b.WriteString(strings.ReplaceAll(d.src, publishCall, "publish("))
		}
	}
	helpers := b.String()

	// A script's body is compiled once, as a local function of a block
	// that registers both twins, which call it: the library takes 148 KB
	// of the functions' Lua heap, where a copy of each body per twin took
	// 201 KB (collectgarbage('count') after a full collection, Redis
	// 7.0.15). Memory, not time: the garbage collector's work follows
	// what the calls allocate (see docs/design.md#cost).
	var fns strings.Builder
	for _, s := range all {
		body := strings.ReplaceAll(s.body, publishCall, "publish(")
		fns.WriteString("do\nlocal function body()\n" + body + "\nend\n")
		for _, twin := range []bool{false, true} {
			name := s.name
			flag := "false"
			if twin {
				name, flag = name+twinSuffix, "true"
			}
			fns.WriteString("redis.register_function{function_name='<prefix>" + name +
				"', callback=function(keys, args)\nKEYS, ARGV, cluster, clock_us = keys, args, " + flag + ", false" +
				"\nreturn body()\nend" + s.flags() + "}\n")
		}
		fns.WriteString("end\n")
	}
	sum := sha1.Sum([]byte(helpers + fns.String()))
	library.version = hex.EncodeToString(sum[:])[:12]
	library.name = "relock_" + library.version
	library.fnPrefix = library.name + "_"
	for _, s := range all {
		s.fn, s.fnTwin = library.fnPrefix+s.name, library.fnPrefix+s.name+twinSuffix
	}
	library.src = "#!lua name=" + library.name + "\n" + helpers +
		strings.ReplaceAll(fns.String(), "<prefix>", library.fnPrefix)
}

// Library returns the name of relock's function library and its source,
// for FUNCTION LOAD.
func Library() (name, src string) {
	library.once.Do(buildLibrary)
	return library.name, library.src
}

// Function returns the name of s in the function library; on a Redis
// Cluster (sharded), of its twin that publishes with SPUBLISH.
func (s *Script) Function(sharded bool) string {
	library.once.Do(buildLibrary)
	if sharded {
		return s.fnTwin
	}
	return s.fn
}

// flags returns the flags s is registered with, as the tail of its
// register_function table. A function without flags is refused as a
// whole when Redis is out of memory (maxmemory reached, noeviction),
// where a script runs until a command that may grow memory: renewals,
// releases and the calls that give a place up (abort, leave, resign,
// force-unlock) only keep or free memory, so they must still run then,
// or every watched hold would be lost and no lock could be released.
// Acquires are refused, as they are as scripts.
func (s *Script) flags() string {
	for _, op := range []string{"renew", "resume", "_release", "_abort", "_leave", "_resign", "force_"} {
		if strings.Contains(s.name, op) {
			return ", flags={'allow-oom'}"
		}
	}
	return ""
}

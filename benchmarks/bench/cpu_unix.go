//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) this process has used,
// and whether it is known.
func processCPU() (time.Duration, bool) {
	ru, ok := usage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ok
}

// processSwitches returns how many times this process's threads have
// been switched out (getrusage: voluntary and involuntary context
// switches), and whether it is known.
func processSwitches() (int64, bool) {
	ru, ok := usage()
	return ru.Nvcsw + ru.Nivcsw, ok
}

// usage is this process's resource usage so far (getrusage); zero and
// false when unknown.
func usage() (syscall.Rusage, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return syscall.Rusage{}, false
	}
	return ru, true
}

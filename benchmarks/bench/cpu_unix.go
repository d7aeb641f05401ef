//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processUsage returns the CPU time (user and system) this process has
// used, how many times its threads have been switched out (voluntary and
// involuntary context switches), and whether they are known: one
// getrusage.
func processUsage() (cpu time.Duration, switches int64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw, true
}

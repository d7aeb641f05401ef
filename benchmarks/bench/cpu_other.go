//go:build !unix

package bench

import "time"

// processUsage is not known on this platform.
func processUsage() (cpu time.Duration, switches int64, ok bool) { return 0, 0, false }

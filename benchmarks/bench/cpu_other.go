//go:build !unix

package bench

import "time"

// processCPU is not known on this platform.
func processCPU() (time.Duration, bool) { return 0, false }

// processSwitches is not known on this platform.
func processSwitches() (int64, bool) { return 0, false }

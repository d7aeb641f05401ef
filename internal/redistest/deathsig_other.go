//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing where PR_SET_PDEATHSIG does not exist.
func dieWithParent(*exec.Cmd) {}

package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has cmd's process killed when the test binary dies
// (PR_SET_PDEATHSIG): a binary that panics or is killed, which runs no
// cleanup, leaves no redis-server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

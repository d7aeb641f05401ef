//go:build unix

package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// runSignals are the signals that run handles: those it passes on to the
// child (see signalGroup), and SIGTSTP and SIGCONT (see jobControl).
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGCONT}

// prepareChild makes cmd's process the leader of a process group of its
// own, so that a signal reaches it and everything it starts (and a
// signal from the terminal reaches it once, through relock run); on
// Linux, it is killed if relock run dies (see pdeathsig).
func prepareChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pdeathsig(cmd.SysProcAttr)
	return nil
}

// signalGroup sends sig to the process group of the child pid, then
// SIGCONT, so that a stopped child (one that read the terminal, say)
// gets it too. A group that is gone is not an error.
func signalGroup(pid int, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	_ = syscall.Kill(-pid, s)
	if s != syscall.SIGKILL && s != syscall.SIGCONT {
		_ = syscall.Kill(-pid, syscall.SIGCONT)
	}
}

// groupAlive reports whether the process group pid has a process left
// (one that has exited but not been reaped yet counts too).
func groupAlive(pid int) bool { return syscall.Kill(-pid, 0) == nil }

// jobControl handles sig if it is SIGTSTP or SIGCONT, and reports whether
// it was. On SIGTSTP (^Z), it stops the child's process group (pid, unless
// 0) and then relock run itself, as SIGTSTP stops one process: a child
// that ran on while relock run is stopped would run without the lock once
// its lease ended. When relock run is continued (fg, bg, SIGCONT), so is
// the child. While both are stopped nothing renews the lease: a stop
// longer than it loses the hold, which relock run then finds and acts on.
func jobControl(sig os.Signal, pid int) bool {
	switch sig {
	case syscall.SIGTSTP:
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGSTOP)
		}
		// Not SIGTSTP, which relock run catches. This goroutine may go on
		// for a moment before the stop: the child is continued on
		// relock run's SIGCONT, not when this returns.
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	case syscall.SIGCONT:
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGCONT)
		}
	default:
		return false
	}
	return true
}

// exitCode is the child's exit status, 128+N when signal N killed it (as
// a shell reports it).
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// describe says how the child ended: "exited with status 3", "was killed
// by SIGKILL".
func describe(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by " + signalName(ws.Signal())
	}
	return "exited with status " + strconv.Itoa(ps.ExitCode())
}

// signalName is sig's name: "SIGTERM", or "signal 12".
func signalName(sig os.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGTSTP: "SIGTSTP",
	}
	s, ok := sig.(syscall.Signal)
	if name := names[s]; ok && name != "" {
		return name
	}
	return "signal " + strconv.Itoa(signalNumber(sig))
}

// signalNumber is sig's number, for the exit status 128+N.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

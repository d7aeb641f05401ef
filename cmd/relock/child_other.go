//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
)

// runSignals: see child_unix.go.
var runSignals = []os.Signal{os.Interrupt}

// prepareChild refuses: run needs Unix process groups and signals.
func prepareChild(*exec.Cmd) error {
	return errors.New("run: not supported on " + runtime.GOOS)
}

func signalGroup(int, os.Signal)       {}
func groupAlive(int) bool              { return false }
func jobControl(os.Signal, int) bool   { return false }
func signalNumber(os.Signal) int       { return 2 }
func signalName(s os.Signal) string    { return s.String() }
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

func describe(ps *os.ProcessState) string {
	return "exited with status " + strconv.Itoa(ps.ExitCode())
}

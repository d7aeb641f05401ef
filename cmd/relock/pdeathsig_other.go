//go:build unix && !linux

package main

import "syscall"

// pdeathsig does nothing: only Linux signals a child when its parent dies.
func pdeathsig(*syscall.SysProcAttr) {}

package main

import "syscall"

// pdeathsig has Linux kill the child when relock run dies (killed with
// SIGKILL, crashed): the lock is then left to expire, and a child that ran
// on would run without it. The rest of the child's process group is not
// reached.
func pdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

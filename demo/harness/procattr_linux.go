package harness

import "syscall"

// childAttr puts a child in a process group of its own, so a Ctrl-C in the
// terminal reaches only us (we then kill the child), and has the kernel
// SIGKILL it if we die without cleaning up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

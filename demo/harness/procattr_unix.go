//go:build unix && !linux

package harness

import "syscall"

// childAttr puts a child in a process group of its own, so a Ctrl-C in the
// terminal reaches only us and we decide how the child ends.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

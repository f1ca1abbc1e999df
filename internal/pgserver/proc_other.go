//go:build !linux

package pgserver

import "syscall"

// sysProcAttr runs postgres as cred, in a process group of its own (so
// Kill reaches its backends too).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}

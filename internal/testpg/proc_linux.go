package testpg

import "syscall"

// sysProcAttr runs postgres as cred and has the kernel stop it (immediate
// shutdown) if the test binary dies without stopping it, so a crashed test
// leaves no server behind.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
}

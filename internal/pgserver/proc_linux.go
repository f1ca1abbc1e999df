package pgserver

import "syscall"

// sysProcAttr runs postgres as cred, in a process group of its own (so
// Kill reaches its backends too), and has the kernel stop it (immediate
// shutdown) if the process that started it dies without stopping it, so a
// crash leaves no server behind.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
}

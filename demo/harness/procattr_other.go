//go:build !unix

package harness

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }

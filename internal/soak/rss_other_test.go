//go:build !linux

package soak

import "errors"

var errNoProc = errors.New("resident set size is read from /proc, which this platform does not have")

func readRSS(pid int) (int64, error) { return 0, errNoProc }

func readHWM(pid int) (int64, error) { return 0, errNoProc }

package soak

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// readRSS returns the process's resident set size in bytes.
func readRSS(pid int) (int64, error) { return statusField(pid, "VmRSS:") }

// readHWM returns the largest resident set size the process has had.
func readHWM(pid int) (int64, error) { return statusField(pid, "VmHWM:") }

func statusField(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s in /proc/%d/status: %w", name, pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

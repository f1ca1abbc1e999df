// Package proccpu reads the CPU time processes have used, for benchmarks
// that report CPU per unit of work: a figure that the disk's fsync latency,
// which swings wall-clock throughput by a third from run to run on a VM,
// hardly moves. Other processes are read from /proc; where it is missing
// their time reads as zero.
package proccpu

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self is the CPU time (user and system) of this process.
func Self() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Of is the CPU time of process pid (utime+stime of /proc/PID/stat).
func Of(pid int) time.Duration {
	st, _ := read(pid)
	return st.cpu
}

// Tree is the CPU time of process pid, of its children, and of the children
// it and they have reaped. A PostgreSQL server is such a tree: its backends
// are children of the postmaster, each in a session of its own (they call
// setsid), so the parent is what ties them together, not the process group;
// the CPU of backends whose connections closed moves to the postmaster's
// cutime and cstime.
func Tree(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	leader, ok := read(pid)
	if !ok {
		return 0
	}
	total := leader.cpu + leader.children
	for _, child := range children(pid) {
		if st, ok := read(child); ok {
			total += st.cpu + st.children
		}
	}
	return total
}

// stat is what the package reads from /proc/PID/stat.
type stat struct {
	ppid     int
	cpu      time.Duration // utime+stime
	children time.Duration // cutime+cstime: of the children it has waited for
}

// read reads /proc/PID/stat; its times are in the kernel's clock ticks
// (USER_HZ, 100 a second on Linux).
func read(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start behind its closing parenthesis, with the state (field 3).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return stat{}, false
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(fields[i], 10, 64); return v }
	tick := time.Second / 100
	return stat{
		ppid:     int(n(1)),
		cpu:      time.Duration(n(11)+n(12)) * tick,
		children: time.Duration(n(13)+n(14)) * tick,
	}, true
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := read(p); ok && st.ppid == pid {
			pids = append(pids, p)
		}
	}
	slices.Sort(pids)
	return pids
}

package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock reads the CPU time (user and system) this process and the worker
// process have used, so a run can report CPU per activity: a figure that the
// disk's fsync latency, which swings wall-clock throughput by a third from
// run to run on a VM, hardly moves.
type cpuClock struct{ workerPID int }

// now returns the CPU time used so far; the worker's is zero where /proc is
// not there to read it.
func (c cpuClock) now() time.Duration {
	var ru syscall.Rusage
	var self time.Duration
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return self + procCPU(c.workerPID)
}

// procCPU is utime+stime of pid from /proc/PID/stat, in the kernel's clock
// ticks (USER_HZ, 100 a second on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start behind its closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100)
}

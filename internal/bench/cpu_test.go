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
	return selfCPU() + procCPU(c.workerPID)
}

// selfCPU is the CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is utime+stime of pid from /proc/PID/stat.
func procCPU(pid int) time.Duration {
	st, _ := readStat(pid)
	return st.cpu
}

// procStat is what the benchmarks read from /proc/PID/stat.
type procStat struct {
	ppid     int
	cpu      time.Duration // utime+stime
	children time.Duration // cutime+cstime: of the children it has waited for
}

// readStat reads /proc/PID/stat; its times are in the kernel's clock ticks
// (USER_HZ, 100 a second on Linux).
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start behind its closing parenthesis, with the state (field 3).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return procStat{}, false
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(fields[i], 10, 64); return v }
	tick := time.Second / 100
	return procStat{
		ppid:     int(n(1)),
		cpu:      time.Duration(n(11)+n(12)) * tick,
		children: time.Duration(n(13)+n(14)) * tick,
	}, true
}

// procEntries lists the process ids in /proc.
func procEntries() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

package bench

import (
	"time"

	"github.com/tinyllm/durable/internal/proccpu"
)

// cpuClock reads the CPU time (user and system) this process and the worker
// process have used, so a run can report CPU per activity.
type cpuClock struct{ workerPID int }

// now returns the CPU time used so far; the worker's is zero where /proc is
// not there to read it.
func (c cpuClock) now() time.Duration {
	return selfCPU() + procCPU(c.workerPID)
}

// selfCPU is the CPU time of this process.
func selfCPU() time.Duration { return proccpu.Self() }

// procCPU is the CPU time of process pid.
func procCPU(pid int) time.Duration { return proccpu.Of(pid) }

// Package harness runs the demo's real processes: a durabled child on a data
// dir of its own, demo worker children, and the effects sink served from the
// calling process. It kills them with SIGKILL when told to, restarts the
// daemon on the same data dir and port, and makes sure no child outlives the
// caller (process groups, a parent-death signal on Linux, Close on every exit
// path). RunFlaky drives FlakyDemo through a kill loop and reports what
// happened; the scripted demo and the fault tests both use it.
package harness

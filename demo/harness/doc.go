// Package harness runs the demo's real processes: a durabled child on a data
// dir of its own (or several durabled nodes sharing one PostgreSQL
// database), demo worker children, and the effects sink served from the
// calling process. It kills them with SIGKILL when told to, restarts a
// daemon or node on the same data and port, and makes sure no child
// outlives the caller (process groups, a parent-death signal on Linux,
// Close on every exit path). RunFlaky drives FlakyDemo through a kill loop
// and reports what happened, checking every effect and every report a
// daemon acknowledged to a worker against the workflow's record; the
// scripted demo and the fault tests both use it.
package harness

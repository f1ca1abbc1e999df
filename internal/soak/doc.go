// Package soak holds the soak and fault test of durable: a load of workflows
// with retries, heartbeats, dead letters and redrives (one at a time and as
// operations) runs against the real durabled binary, on disk with fsync on,
// while the test SIGKILLs it at random moments and starts it again on the
// same data directory. When the load ends and the faults stop, every change
// durabled acknowledged is looked for in what it recovered.
//
//	go test ./internal/soak                                  # the short soak: 1 min, 20 kills (runs in CI)
//	go test -tags soak -timeout 0 -v ./internal/soak         # the long soak: 10 min, a kill every 3 s
//	go test -tags soak -timeout 0 -v ./internal/soak -soak.duration 1h -soak.kill-every 10s -soak.workflows 16
//
// # What runs
//
// The test process holds two workers (the Go SDK, unchanged), a starter per
// workflow in flight, an operator that opens the "downstream" of dead letters
// and redrives them, a console that follows Watch, and the effects sink
// (demo/sink): one fsynced log of the idempotency keys activities applied.
// Every client finds durabled through a resolver the test points at its new
// port after each restart. A gRPC interceptor on the workers' connections
// writes every acknowledged call (answered OK) into a ledger; the starters
// and the operator record theirs.
//
// # What is checked
//
//   - lost: every acknowledged StartWorkflow exists; every acknowledged
//     workflow task's scheduled activities, timers and close are in history;
//     every acknowledged completion is the activity's ActivityTaskCompleted,
//     by that attempt and worker; every acknowledged failure is in the
//     attempt trail by its unique message (and is the ActivityTaskFailed or
//     ActivityDeadLettered it caused); every acknowledged redrive is one
//     ActivityRedriven with its reason; every operation completed and its
//     events match its count; no lease carries less progress than an
//     heartbeat acknowledged before it; every completed activity's effect
//     is in the sink.
//   - twice: no activity scheduled or ended twice, no timer fired twice, no
//     workflow closed twice, no letter released twice by one operation, no
//     step's effect applied under two activities, no workflow nobody
//     started, one acknowledged completion per activity.
//   - stuck: once the faults end, every workflow and operation finishes
//     within a bound (the operator redrives what is dead), and the
//     console's Watch view shows it.
//   - memory: durabled's resident set (sampled, and its kernel high-water
//     mark before each kill) stays under the bound.
//
// # Reading a failure
//
// The test prints the figures and, per kind, the first ten problems as
// "want" (what the ledger or the rule expected) and "got" (what durabled
// recovered), and keeps the run's directory (named at the top of the output)
// with report.txt (every problem), durabled.log (the stderr of every run,
// each headed by the kill that ended it), workers.log, the data directory
// (start durabled --data on it and look with wf) and the sink's log. The
// seed at the top repeats the workload and the kill times with -soak.seed;
// the interleaving with the daemon does not repeat, so a rare failure is
// investigated from its directory rather than by a rerun.
package soak

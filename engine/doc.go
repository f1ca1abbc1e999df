// Package engine holds every rule of durable as a state machine over a Store
// and a Clock it is given; it knows nothing of gRPC or Badger.
//
// Where to read what:
//
//   - rules.go: where the rules end and the runtime begins. Each transition
//     is a pure function of the records, the request, the time and a
//     ruleEnv (settings, overrides, jitter, ids), returning the records as
//     they become, history events and effects; each has a table test.
//     rules_activity.go: lease, heartbeat, completion, failure (failAttempt,
//     the one retry path, for reported failures and expired leases alike)
//     and the dead letter. rules_workflow.go: workflow starts, workflow
//     tasks and their commands. rules_redrive.go: a dead letter back to
//     attempt 1. rules_timers.go: what each timer does when it comes due.
//     apply.go: the runtime's half, which writes a rule's step and does its
//     effects.
//   - retry.go: the retry rule (Decide) and the lease deadline (LeaseDeadline),
//     pure functions of the activity, the failure and the time.
//   - policy.go: the options in force (InForce), the code's with the policy
//     override of the activity's type applied, which every decision reads;
//     override.go: setting and clearing overrides, and moving the timers of
//     pending activities when one changes.
//   - activity.go: the RPCs of activities (polls, completions, failures,
//     heartbeats): read, call the rule, apply. redrive.go: the redrive RPC,
//     and the one redrive that operations call for each letter.
//   - operation.go: the rules of redrive operations (pacing, progress,
//     cancel); operation_run.go: their start, describe, list and cancel;
//     releaser.go: the goroutine that releases their letters, and resume
//     after a restart.
//   - workflow.go: the RPCs of workflows and workflow tasks, and the history
//     a leased task carries. sticky.go: which events a workflow task
//     carries (partialFrom, continuesTask): only the new ones for the
//     worker session that ran and completed the previous task, the whole
//     history otherwise.
//   - timers.go: the timer loop, and which rule a due timer goes to.
//   - batch.go: how transitions reach the store: one goroutine applies them in
//     batches, one store transaction per batch, then syncs, and only then
//     publishes what they changed (queues, timers, watchers). gate.go: the
//     write gate, closed while the disk is short of space (or for good after
//     a failed sync, or on a read-only store): changes of state are refused,
//     polls hand out nothing, timers and janitors wait, reads go on.
//   - index.go, poll.go: the in-memory queue and timer heaps and the long polls
//     parked on them. horizon.go: the window of waiting work they hold
//     (what falls due within a few minutes; the rest stays in the store's
//     due-time indexes until the window reaches it), and the start, which
//     reads that window, not every record.
//   - query.go, watch.go, latency.go: describe, lists, the Watch stream and the
//     attempt latency histograms, kept by the hour for stats windows.
//     activities_query.go: pending activities across workflows, read from
//     the store's state index.
//   - finished.go: what is kept of an activity that ended (its attempt
//     trail) and the janitor that deletes it after the attempt retention.
//   - audit.go: the audit log of operator actions, written in the
//     transaction of the action, and its retention janitor. patch.go:
//     ApplyPatch, the one meaning of an options patch (overrides and edits).
//   - observe.go, gauge.go: what metrics hear (the Observer, told after each
//     commit) and the per-queue, per-state counts of activities, kept by
//     watching the states each transition reads and writes (trackTx), and
//     read at start from the counts the store keeps with the records.
//   - runtime.go: the one seam between the rules and the store's kind: how
//     polls find tasks, how due timers are found, where ids come from and
//     what a batch does before it commits. The embedded runtime (the heaps
//     and the window above) serves a store one engine uses; the shared one
//     (runtime_shared.go) a store several nodes share (shared.go): claims
//     from the store, ids in blocks, a notice per batch, and the other
//     nodes' notices acted on in remote.go.
//   - store.go: the Store interface and the index entries a record implies.
//
// Tests run the engine on a FakeClock over an in-memory store; nothing in a
// test sleeps.
package engine

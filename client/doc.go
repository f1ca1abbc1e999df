// Package client talks to a durable daemon: start workflows and wait for their
// results, and the operator calls behind wf and wfui (describe, history, list,
// dead letters and redrives, redrive operations the daemon runs, the audit
// log, activity stats, the live Watch stream).
//
//	c, err := client.Dial(ctx, "127.0.0.1:7345")
//	if err != nil { ... }
//	defer c.Close()
//	run, err := c.Start(ctx, "FlakyDemo", Input{FailRate: 0.5}, client.StartOptions{})
//	var out Output
//	err = run.Get(ctx, &out) // blocks until the workflow closes
//
// Payloads (workflow input and result) go through a DataConverter, JSON unless
// WithConverter says otherwise. Workers built on the same Client use the same
// converter, so both sides agree.
//
// The rules wf and wfui show their rows by live here too, as pure functions
// of what the daemon sent and a clock, so the two cannot disagree: what an
// activity waits on and for how long (NextOf), its retry schedule
// (RetryScheduleOf), what waits on a queue nobody polls (ActivityWait,
// WorkflowWait), one selection language (ParseSelection) and the policy
// check (CheckPolicy).
package client

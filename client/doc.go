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
package client

// Package workflow is what a workflow author needs: a Context, activities
// that return futures, durable timers, the workflow's own clock and info, and
// coroutines.
//
// A workflow function has the shape
//
//	func(ctx workflow.Context[, in T]) ([R,] error)
//
// and must be deterministic: run again over the same history it must make the
// same calls in the same order. A workflow task may replay the whole history
// from the start (a worker keeps recently run workflows in a cache and then
// applies only the new events, but any other worker, or this one after an
// eviction or a restart, replays); results already in history are handed back
// without running anything again. So workflow code must not read the wall
// clock (use Now), use goroutines (use Go), sleep (use Sleep) or do I/O (use
// an activity).
//
//	func Order(ctx workflow.Context, id string) (Receipt, error) {
//		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
//			StartToCloseTimeout: time.Minute,
//			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
//		})
//		var r Receipt
//		err := workflow.ExecuteActivity(ctx, Charge, id).Get(ctx, &r)
//		return r, err
//	}
//
// When the code no longer matches its history (an activity of another type, or
// in another order, where history has one) the workflow task fails with type
// NonDeterminism and is retried by the daemon; deploy a fix and it recovers.
package workflow

package activity

// Failure types the system itself reports, in one place: the daemon's
// timeouts, what the worker reports for an attempt that could not run or
// report, and what the workflow side reports for a task it could not finish.
// Retry policies, dead-letter filters and operators name these strings; an
// activity's own failures use types of its choosing (NewError,
// NewNonRetryable) and should not reuse these.
const (
	// TypeStartToCloseTimeout: an attempt's lease ran out at its
	// start-to-close timeout. Retryable.
	TypeStartToCloseTimeout = "StartToCloseTimeout"
	// TypeHeartbeatTimeout: a heartbeating attempt went longer than its
	// heartbeat timeout without a heartbeat. Retryable; the next attempt
	// gets the last heartbeat's details.
	TypeHeartbeatTimeout = "HeartbeatTimeout"
	// TypeScheduleToStartTimeout: no worker picked the attempt up within its
	// schedule-to-start timeout. The activity is dead-lettered.
	TypeScheduleToStartTimeout = "ScheduleToStartTimeout"
	// TypeScheduleToCloseTimeout: the activity's total budget, retries and
	// backoffs included, ran out. The activity is dead-lettered.
	TypeScheduleToCloseTimeout = "ScheduleToCloseTimeout"
	// TypeWorkflowTaskTimeout: a workflow task was not completed within the
	// daemon's workflow task timeout. The task is retried with backoff.
	TypeWorkflowTaskTimeout = "WorkflowTaskTimeout"

	// TypeTimeout: the activity returned a context deadline error, or its
	// lease's deadline cancelled its context before it returned. Retryable.
	TypeTimeout = "Timeout"
	// TypeWorkerShutdown: the worker stopped before the attempt finished.
	// Retryable, on another worker.
	TypeWorkerShutdown = "WorkerShutdown"
	// TypePanic: the activity or the workflow code panicked; Details holds
	// the stack. Retryable (a workflow task is retried with backoff, so a
	// fixed worker can take over).
	TypePanic = "Panic"
	// TypeError: the activity or workflow returned a plain Go error, one
	// without an *Error in its chain. Retryable.
	TypeError = "Error"
	// TypeUnknown: a failure was reported without saying what it was.
	TypeUnknown = "Unknown"
	// TypePayloadTooLarge: an attempt's result, failure or heartbeat details
	// are over the daemon's payload limit (--max-payload). Non-retryable, as
	// the same code would produce the same payload again; the message gives
	// the size and the limit.
	TypePayloadTooLarge = "PayloadTooLarge"
	// TypeBadInput: the input could not be decoded into the function's
	// parameter. Non-retryable.
	TypeBadInput = "BadInput"
	// TypeBadResult: the function's result could not be encoded.
	// Non-retryable.
	TypeBadResult = "BadResult"
	// TypeActivityNotRegistered: the worker that leased the attempt has no
	// activity of that type. Retryable, so a worker that has it can take it.
	TypeActivityNotRegistered = "ActivityNotRegistered"
	// TypeWorkflowNotRegistered: the worker that leased the workflow task has
	// no workflow of that type. Retryable.
	TypeWorkflowNotRegistered = "WorkflowNotRegistered"
	// TypeNonDeterminism: replaying the workflow's history, the code made
	// different calls than the ones recorded. Retryable, so a worker with the
	// old code, or fixed code, can take the task.
	TypeNonDeterminism = "NonDeterminism"
	// TypeBlocked: workflow code ran too long without yielding (it waited on
	// a channel, a lock or I/O instead of this SDK). Retryable.
	TypeBlocked = "Blocked"
	// TypeCommandsRefused: the daemon refused a workflow task's commands as
	// invalid (an input over the payload limit, an option out of bounds).
	// Non-retryable: the same code would send the same commands again, so
	// the workflow fails with it; the message names the command, the field
	// and the bound.
	TypeCommandsRefused = "CommandsRefused"
)

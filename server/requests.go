package server

import (
	"math"
	"strings"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// One check per request type. Each returns the first problem it finds, as a
// *fieldError naming the field; a nil request reads as an empty one.

func (v validator) startWorkflow(r *durablev1.StartWorkflowRequest) error {
	return first(
		func() error { return v.id("workflow_id", r.GetWorkflowId()) },
		func() error { return v.id("workflow_type", r.GetWorkflowType()) },
		func() error { return v.id("task_queue", r.GetTaskQueue()) },
		func() error { return v.payload("input", len(r.GetInput())) },
	)
}

func (v validator) describeWorkflow(r *durablev1.DescribeWorkflowRequest) error {
	return v.ref("workflow_id", r.GetWorkflowId())
}

func (v validator) getWorkflowHistory(r *durablev1.GetWorkflowHistoryRequest) error {
	return v.ref("workflow_id", r.GetWorkflowId())
}

func (v validator) listWorkflows(r *durablev1.ListWorkflowsRequest) error {
	return first(
		func() error {
			if _, ok := durablev1.WorkflowStatus_name[int32(r.GetStatus())]; !ok {
				return invalidf("status", "unknown workflow status %d", r.GetStatus())
			}
			return nil
		},
		func() error { return v.pageSize("page_size", r.GetPageSize()) },
		func() error { return v.pageToken("next_page_token", r.GetNextPageToken()) },
	)
}

func (v validator) listDeadLetters(r *durablev1.ListDeadLettersRequest) error {
	return first(
		func() error { return v.text("workflow_id", r.GetWorkflowId()) },
		func() error { return v.text("activity_type", r.GetActivityType()) },
		func() error { return v.text("failure_type", r.GetFailureType()) },
		func() error { return v.fingerprint("failure_fingerprint", r.GetFailureFingerprint()) },
		func() error {
			return v.timeRange("dead_lettered_after", r.GetDeadLetteredAfter(), "dead_lettered_before", r.GetDeadLetteredBefore())
		},
		func() error { return v.pageSize("page_size", r.GetPageSize()) },
		func() error { return v.pageToken("next_page_token", r.GetNextPageToken()) },
	)
}

func (v validator) listActivities(r *durablev1.ListActivitiesRequest) error {
	return first(
		func() error {
			if _, ok := durablev1.ActivityState_name[int32(r.GetState())]; !ok {
				return invalidf("state", "unknown activity state %d", r.GetState())
			}
			return nil
		},
		func() error {
			if n := r.GetMinAttempt(); n < 0 || n > maxAttempts {
				return invalidf("min_attempt", "must be in [0, %d], got %d", maxAttempts, n)
			}
			return nil
		},
		func() error { return v.text("failure_type", r.GetFailureType()) },
		func() error { return v.fingerprint("failure_fingerprint", r.GetFailureFingerprint()) },
		func() error { return v.text("activity_type", r.GetActivityType()) },
		func() error { return v.text("task_queue", r.GetTaskQueue()) },
		func() error { return v.pageSize("page_size", r.GetPageSize()) },
		func() error { return v.pageToken("next_page_token", r.GetNextPageToken()) },
	)
}

func (v validator) redriveDeadLetter(r *durablev1.RedriveDeadLetterRequest) error {
	return first(
		func() error { return v.ref("workflow_id", r.GetWorkflowId()) },
		func() error { return v.ref("activity_id", r.GetActivityId()) },
		func() error { return v.reason("reason", r.GetReason()) },
		func() error { return v.edit("edit", r.GetEdit()) },
	)
}

func (v validator) redriveDeadLetters(r *durablev1.RedriveDeadLettersRequest) error {
	return first(
		func() error { return v.deadLetterFilter("filter", r.GetFilter()) },
		func() error {
			if len(r.GetActivities()) > 0 && filterSetsSomething(r.GetFilter()) {
				return invalidf("activities", "give a filter or a list of activities, not both")
			}
			if n := len(r.GetActivities()); n > maxRedriveList {
				return invalidf("activities", "must have at most %d entries, got %d", maxRedriveList, n)
			}
			return nil
		},
		func() error {
			for i, a := range r.GetActivities() {
				if err := v.ref(field(index("activities", i), "workflow_id"), a.GetWorkflowId()); err != nil {
					return err
				}
				if err := v.ref(field(index("activities", i), "activity_id"), a.GetActivityId()); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			if rate := r.GetRate(); math.IsNaN(rate) || rate < 0 || rate > maxRedriveRate {
				return invalidf("rate", "must be in [0, %d] letters per second (0 means %d), got %v", maxRedriveRate, engine.DefaultRedriveRate, rate)
			}
			return nil
		},
		func() error { return v.reason("reason", r.GetReason()) },
		func() error { return v.edit("edit", r.GetEdit()) },
	)
}

// deadLetterFilter checks an optional DeadLetterFilter: the ids as ids, the
// fingerprint as opaque text, the window as valid times in order.
func (v validator) deadLetterFilter(path string, f *durablev1.DeadLetterFilter) error {
	return first(
		func() error { return v.text(field(path, "workflow_id"), f.GetWorkflowId()) },
		func() error { return v.text(field(path, "activity_type"), f.GetActivityType()) },
		func() error { return v.text(field(path, "failure_type"), f.GetFailureType()) },
		func() error { return v.fingerprint(field(path, "failure_fingerprint"), f.GetFailureFingerprint()) },
		func() error {
			return v.timeRange(field(path, "dead_lettered_after"), f.GetDeadLetteredAfter(), field(path, "dead_lettered_before"), f.GetDeadLetteredBefore())
		},
	)
}

// filterSetsSomething reports whether f narrows the letters at all.
func filterSetsSomething(f *durablev1.DeadLetterFilter) bool {
	return f.GetWorkflowId() != "" || f.GetActivityType() != "" || f.GetFailureType() != "" || f.GetFailureFingerprint() != "" ||
		f.GetDeadLetteredAfter() != nil || f.GetDeadLetteredBefore() != nil
}

func (v validator) describeOperation(r *durablev1.DescribeOperationRequest) error {
	return v.ref("id", r.GetId())
}

func (v validator) listOperations(r *durablev1.ListOperationsRequest) error {
	return first(
		func() error { return v.pageSize("page_size", r.GetPageSize()) },
		func() error { return v.pageToken("next_page_token", r.GetNextPageToken()) },
	)
}

func (v validator) cancelOperation(r *durablev1.CancelOperationRequest) error {
	return first(
		func() error { return v.ref("id", r.GetId()) },
		func() error { return v.reason("reason", r.GetReason()) },
	)
}

func (v validator) listTaskQueues(r *durablev1.ListTaskQueuesRequest) error {
	return v.optionalID("task_queue", r.GetTaskQueue())
}

// listNodes has nothing to check: the request has no fields.
func (validator) listNodes(*durablev1.ListNodesRequest) error { return nil }

func (v validator) listAuditRecords(r *durablev1.ListAuditRecordsRequest) error {
	return first(
		func() error {
			if s := r.GetSince(); s != nil && s.CheckValid() != nil {
				return invalidf("since", "is not a valid timestamp")
			}
			return nil
		},
		func() error { return v.pageSize("page_size", r.GetPageSize()) },
		func() error { return v.pageToken("next_page_token", r.GetNextPageToken()) },
	)
}

func (v validator) pollWorkflowTask(r *durablev1.PollWorkflowTaskRequest) error {
	return first(
		func() error { return v.ref("task_queue", r.GetTaskQueue()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.optionalID("sticky_session", r.GetStickySession()) },
	)
}

func (v validator) getWorkflowTaskHistory(r *durablev1.GetWorkflowTaskHistoryRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error {
			if r.GetBeforeEventId() < 0 {
				return invalidf("before_event_id", "must not be negative, got %d", r.GetBeforeEventId())
			}
			return nil
		},
	)
}

func (v validator) completeWorkflowTask(r *durablev1.CompleteWorkflowTaskRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.commands(r.GetCommands()) },
	)
}

func (v validator) failWorkflowTask(r *durablev1.FailWorkflowTaskRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.failure("failure", r.GetFailure()) },
	)
}

func (v validator) pollActivityTask(r *durablev1.PollActivityTaskRequest) error {
	return first(
		func() error { return v.ref("task_queue", r.GetTaskQueue()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error {
			if n := r.GetMaxTasks(); n < 0 || n > maxPollTasks {
				return invalidf("max_tasks", "must be in [0, %d], got %d", maxPollTasks, n)
			}
			return nil
		},
	)
}

func (v validator) completeActivityTask(r *durablev1.CompleteActivityTaskRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.payload("result", len(r.GetResult())) },
	)
}

func (v validator) failActivityTask(r *durablev1.FailActivityRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.failure("failure", r.GetFailure()) },
	)
}

func (v validator) recordHeartbeat(r *durablev1.HeartbeatRequest) error {
	return first(
		func() error { return v.taskToken("task_token", r.GetTaskToken()) },
		func() error { return v.optionalID("identity", r.GetIdentity()) },
		func() error { return v.payload("details", len(r.GetDetails())) },
	)
}

// commands checks the commands of one workflow task: known types, the fields
// each type needs, activity and timer ids unique within the task, and nothing
// after the command that closes the workflow.
func (v validator) commands(cmds []*durablev1.Command) error {
	if len(cmds) > maxCommands {
		return invalidf("commands", "must have at most %d entries, got %d", maxCommands, len(cmds))
	}
	activities := make(map[string]int)
	timers := make(map[string]int)
	closedAt := -1
	for i, c := range cmds {
		path := index("commands", i)
		if closedAt >= 0 {
			return invalidf(path, "must not follow the workflow-closing command commands[%d]", closedAt)
		}
		var err error
		switch c.GetType() {
		case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
			err = v.scheduleActivity(path, c, activities, i)
		case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
			err = v.startTimer(path, c, timers, i)
		case durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW:
			err = v.payload(field(path, "result"), len(c.GetResult()))
			closedAt = i
		case durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW:
			err = v.failure(field(path, "failure"), c.GetFailure())
			closedAt = i
		case durablev1.CommandType_COMMAND_TYPE_UNSPECIFIED:
			err = invalidf(field(path, "type"), "is required")
		default:
			err = invalidf(field(path, "type"), "unknown command type %d", c.GetType())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (v validator) scheduleActivity(path string, c *durablev1.Command, seen map[string]int, i int) error {
	id := c.GetActivityId()
	if err := v.id(field(path, "activity_id"), id); err != nil {
		return err
	}
	if strings.Contains(id, "/") {
		// Workflow "a/b" with activity "c" and workflow "a" with activity
		// "b/c" would share the key "a/b/c", and a receiver would take one's
		// effect for the other's.
		return invalidf(field(path, "activity_id"), "must not contain '/': the idempotency key is <workflow_id>/<activity_id>, and a '/' in the activity id lets two activities share one, got %q", id)
	}
	if j, dup := seen[id]; dup {
		return invalidf(field(path, "activity_id"), "duplicates commands[%d].activity_id %q", j, id)
	}
	seen[id] = i
	return first(
		func() error { return v.id(field(path, "activity_type"), c.GetActivityType()) },
		func() error { return v.payload(field(path, "input"), len(c.GetInput())) },
		func() error { return v.activityOptions(field(path, "activity_options"), c.GetActivityOptions()) },
	)
}

func (v validator) startTimer(path string, c *durablev1.Command, seen map[string]int, i int) error {
	id := c.GetTimerId()
	if err := v.id(field(path, "timer_id"), id); err != nil {
		return err
	}
	if j, dup := seen[id]; dup {
		return invalidf(field(path, "timer_id"), "duplicates commands[%d].timer_id %q", j, id)
	}
	seen[id] = i
	return v.duration(field(path, "timer_duration"), c.GetTimerDuration())
}

// first runs checks in order and returns the first error.
func first(checks ...func() error) error {
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (v validator) setPolicyOverride(r *durablev1.SetPolicyOverrideRequest) error {
	return first(
		func() error { return v.id("activity_type", r.GetActivityType()) },
		func() error { return v.optionalID("task_queue", r.GetTaskQueue()) },
		func() error {
			if r.GetPatch() == nil || !patchSetsSomething(r.GetPatch()) {
				return invalidf("patch", "must set at least one field to override")
			}
			return nil
		},
		func() error { return v.optionsPatch("patch", r.GetPatch()) },
		func() error { return v.reason("reason", r.GetReason()) },
	)
}

func (v validator) clearPolicyOverride(r *durablev1.ClearPolicyOverrideRequest) error {
	return first(
		func() error { return v.ref("activity_type", r.GetActivityType()) },
		func() error { return v.text("task_queue", r.GetTaskQueue()) },
		func() error { return v.reason("reason", r.GetReason()) },
	)
}

func (v validator) listActivityStats(r *durablev1.ListActivityStatsRequest) error {
	if s := r.GetSince(); s != nil && s.CheckValid() != nil {
		return invalidf("since", "is not a valid timestamp")
	}
	return nil
}

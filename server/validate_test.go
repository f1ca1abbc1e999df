package server

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Bad-input tables, one per RPC, over real gRPC.

var (
	longID    = strings.Repeat("a", maxIDLen+1)
	longToken = make([]byte, maxTokenLen+1)
	garbage   = []byte{0xff, 0xff, 0xff}
)

func TestStartWorkflow_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	wf, q := uid("wf-start"), uid("q-start")
	ok := func(mod func(*durablev1.StartWorkflowRequest)) *durablev1.StartWorkflowRequest {
		r := &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: q}
		mod(r)
		return r
	}
	runBadInputs(t, c.StartWorkflow, []badInput[*durablev1.StartWorkflowRequest]{
		{"MissingWorkflowID", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowId = "" }), codes.InvalidArgument, "workflow_id"},
		{"MissingWorkflowType", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowType = "" }), codes.InvalidArgument, "workflow_type"},
		{"MissingTaskQueue", ok(func(r *durablev1.StartWorkflowRequest) { r.TaskQueue = "" }), codes.InvalidArgument, "task_queue"},
		{"WorkflowIDTooLong", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowId = longID }), codes.InvalidArgument, "workflow_id"},
		{"WorkflowIDControlChar", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowId = "a\x00b" }), codes.InvalidArgument, "workflow_id"},
		{"TaskQueueTooLong", ok(func(r *durablev1.StartWorkflowRequest) { r.TaskQueue = longID }), codes.InvalidArgument, "task_queue"},
		{"WorkflowIDBidiOverride", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowId = "a\u202eb" }), codes.InvalidArgument, "workflow_id"},
		{"WorkflowTypeZeroWidthSpace", ok(func(r *durablev1.StartWorkflowRequest) { r.WorkflowType = "T\u200b" }), codes.InvalidArgument, "workflow_type"},
		{"TaskQueueOnlySpaces", ok(func(r *durablev1.StartWorkflowRequest) { r.TaskQueue = "  " }), codes.InvalidArgument, "task_queue"},
		{"InputOverLimit", ok(func(r *durablev1.StartWorkflowRequest) { r.Input = over(testMaxPayload) }), codes.InvalidArgument, "input"},
		{"InputAtLimit", ok(func(r *durablev1.StartWorkflowRequest) { r.Input = make([]byte, testMaxPayload) }), codes.OK, ""},
		{"AlreadyExists", ok(func(r *durablev1.StartWorkflowRequest) {}), codes.AlreadyExists, ""},
	})
}

func TestDescribeWorkflow_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.DescribeWorkflow, []badInput[*durablev1.DescribeWorkflowRequest]{
		{"MissingWorkflowID", &durablev1.DescribeWorkflowRequest{}, codes.InvalidArgument, "workflow_id"},
		{"WorkflowIDTooLong", &durablev1.DescribeWorkflowRequest{WorkflowId: longID}, codes.InvalidArgument, "workflow_id"},
		{"UnknownWorkflow", &durablev1.DescribeWorkflowRequest{WorkflowId: "nope"}, codes.NotFound, ""},
		// Ids stored before they had to be plain can still be looked up.
		{"IDAsOlderStoresMayHoldIt", &durablev1.DescribeWorkflowRequest{WorkflowId: "a\u202eb\u200b "}, codes.NotFound, ""},
	})
}

func TestGetWorkflowHistory_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.GetWorkflowHistory, []badInput[*durablev1.GetWorkflowHistoryRequest]{
		{"MissingWorkflowID", &durablev1.GetWorkflowHistoryRequest{}, codes.InvalidArgument, "workflow_id"},
		{"WorkflowIDControlChar", &durablev1.GetWorkflowHistoryRequest{WorkflowId: "a\tb"}, codes.InvalidArgument, "workflow_id"},
		{"UnknownWorkflow", &durablev1.GetWorkflowHistoryRequest{WorkflowId: "nope"}, codes.NotFound, ""},
	})
}

func TestListWorkflows_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListWorkflows, []badInput[*durablev1.ListWorkflowsRequest]{
		{"NegativePageSize", &durablev1.ListWorkflowsRequest{PageSize: -1}, codes.InvalidArgument, "page_size"},
		{"HugePageSize", &durablev1.ListWorkflowsRequest{PageSize: maxPageSize + 1}, codes.InvalidArgument, "page_size"},
		{"UnknownStatus", &durablev1.ListWorkflowsRequest{Status: 99}, codes.InvalidArgument, "status"},
		{"PageTokenTooLong", &durablev1.ListWorkflowsRequest{NextPageToken: longToken}, codes.InvalidArgument, "next_page_token"},
		{"PageTokenIsABareID", &durablev1.ListWorkflowsRequest{NextPageToken: []byte("wf-1")}, codes.InvalidArgument, "next_page_token"},
		{"PageTokenOfDeadLetters", &durablev1.ListWorkflowsRequest{NextPageToken: []byte{0x12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'w', '1'}}, codes.InvalidArgument, "next_page_token"},
		{"Empty", &durablev1.ListWorkflowsRequest{}, codes.OK, ""},
	})
}

func TestListDeadLetters_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListDeadLetters, []badInput[*durablev1.ListDeadLettersRequest]{
		{"NegativePageSize", &durablev1.ListDeadLettersRequest{PageSize: -5}, codes.InvalidArgument, "page_size"},
		{"HugePageSize", &durablev1.ListDeadLettersRequest{PageSize: 1 << 30}, codes.InvalidArgument, "page_size"},
		{"WorkflowIDTooLong", &durablev1.ListDeadLettersRequest{WorkflowId: longID}, codes.InvalidArgument, "workflow_id"},
		{"ActivityTypeControlChar", &durablev1.ListDeadLettersRequest{ActivityType: "x\x1b[2J"}, codes.InvalidArgument, "activity_type"},
		{"FailureTypeTooLong", &durablev1.ListDeadLettersRequest{FailureType: longID}, codes.InvalidArgument, "failure_type"},
		{"PageTokenTooLong", &durablev1.ListDeadLettersRequest{NextPageToken: longToken}, codes.InvalidArgument, "next_page_token"},
		{"ForeignPageToken", &durablev1.ListDeadLettersRequest{NextPageToken: []byte("garbage")}, codes.InvalidArgument, "next_page_token"},
		{"ShortFingerprint", &durablev1.ListDeadLettersRequest{FailureFingerprint: "3f2a"}, codes.InvalidArgument, "failure_fingerprint"},
		{"UpperCaseFingerprint", &durablev1.ListDeadLettersRequest{FailureFingerprint: "3F2A00000000"}, codes.InvalidArgument, "failure_fingerprint"},
		{"Fingerprint", &durablev1.ListDeadLettersRequest{FailureFingerprint: "3f2a00000000"}, codes.OK, ""},
		{"InvalidAfter", &durablev1.ListDeadLettersRequest{DeadLetteredAfter: &timestamppb.Timestamp{Nanos: -1}}, codes.InvalidArgument, "dead_lettered_after"},
		{"InvalidBefore", &durablev1.ListDeadLettersRequest{DeadLetteredBefore: &timestamppb.Timestamp{Seconds: math.MaxInt64}}, codes.InvalidArgument, "dead_lettered_before"},
		{"BeforeNotAfterAfter", &durablev1.ListDeadLettersRequest{DeadLetteredAfter: timestamppb.New(time.Unix(100, 0)), DeadLetteredBefore: timestamppb.New(time.Unix(100, 0))},
			codes.InvalidArgument, "dead_lettered_before"},
		{"TimeRange", &durablev1.ListDeadLettersRequest{DeadLetteredAfter: timestamppb.New(time.Unix(100, 0)), DeadLetteredBefore: timestamppb.New(time.Unix(101, 0))}, codes.OK, ""},
		{"Empty", &durablev1.ListDeadLettersRequest{}, codes.OK, ""},
	})
}

func TestListActivities_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListActivities, []badInput[*durablev1.ListActivitiesRequest]{
		{"UnknownState", &durablev1.ListActivitiesRequest{State: 99}, codes.InvalidArgument, "state"},
		{"NegativeMinAttempt", &durablev1.ListActivitiesRequest{MinAttempt: -1}, codes.InvalidArgument, "min_attempt"},
		{"HugeMinAttempt", &durablev1.ListActivitiesRequest{MinAttempt: maxAttempts + 1}, codes.InvalidArgument, "min_attempt"},
		{"FailureTypeControlChar", &durablev1.ListActivitiesRequest{FailureType: "a\nb"}, codes.InvalidArgument, "failure_type"},
		{"BadFingerprint", &durablev1.ListActivitiesRequest{FailureFingerprint: "not-a-fingerprint"}, codes.InvalidArgument, "failure_fingerprint"},
		{"ActivityTypeTooLong", &durablev1.ListActivitiesRequest{ActivityType: longID}, codes.InvalidArgument, "activity_type"},
		{"TaskQueueTooLong", &durablev1.ListActivitiesRequest{TaskQueue: longID}, codes.InvalidArgument, "task_queue"},
		{"HugePageSize", &durablev1.ListActivitiesRequest{PageSize: maxPageSize + 1}, codes.InvalidArgument, "page_size"},
		{"PageTokenTooLong", &durablev1.ListActivitiesRequest{NextPageToken: longToken}, codes.InvalidArgument, "next_page_token"},
		{"ForeignPageToken", &durablev1.ListActivitiesRequest{NextPageToken: garbage}, codes.InvalidArgument, "next_page_token"},
		{"Empty", &durablev1.ListActivitiesRequest{}, codes.OK, ""},
		{"EveryFilter", &durablev1.ListActivitiesRequest{State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, MinAttempt: 2, FailureType: "X",
			FailureFingerprint: "0123456789ab", ActivityType: "T", TaskQueue: "q", PageSize: 10}, codes.OK, ""},
	})
}

func TestRedriveDeadLetter_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.RedriveDeadLetter, []badInput[*durablev1.RedriveDeadLetterRequest]{
		{"MissingWorkflowID", &durablev1.RedriveDeadLetterRequest{ActivityId: "1"}, codes.InvalidArgument, "workflow_id"},
		{"MissingActivityID", &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf"}, codes.InvalidArgument, "activity_id"},
		{"ActivityIDTooLong", &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf", ActivityId: longID}, codes.InvalidArgument, "activity_id"},
		{"UnknownActivity", &durablev1.RedriveDeadLetterRequest{WorkflowId: "nope", ActivityId: "1"}, codes.NotFound, ""},
	})
}

func TestRedriveDeadLetterEdit_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	nan, tooMany := math.NaN(), int32(maxAttempts+1)
	ok := func(edit *durablev1.OptionsPatch) *durablev1.RedriveDeadLetterRequest {
		return &durablev1.RedriveDeadLetterRequest{WorkflowId: "nope", ActivityId: "1", Edit: edit}
	}
	runBadInputs(t, c.RedriveDeadLetter, []badInput[*durablev1.RedriveDeadLetterRequest]{
		{"EditSetsNothing", ok(&durablev1.OptionsPatch{}), codes.InvalidArgument, "edit"},
		{"EditBackoffNaN", ok(&durablev1.OptionsPatch{Backoff: &nan}), codes.InvalidArgument, "edit.backoff"},
		{"EditMaxAttemptsTooMany", ok(&durablev1.OptionsPatch{MaxAttempts: &tooMany}), codes.InvalidArgument, "edit.max_attempts"},
		{"EditNegativeTimeout", ok(&durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(-time.Second)}), codes.InvalidArgument, "edit.start_to_close_timeout"},
		{"EditEmptyNonRetryableType", ok(&durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{""}}}), codes.InvalidArgument, "edit.non_retryable.values[0]"},
		{"EditValidButUnknownActivity", ok(&durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(time.Second)}), codes.NotFound, ""},
	})
}

func TestRedriveDeadLetters_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	nan, zero := math.NaN(), int32(0)
	t1, t2 := timestamppb.New(time.Unix(1000, 0)), timestamppb.New(time.Unix(2000, 0))
	// A filter no letter of any other test matches, so valid rows start
	// operations that select nothing.
	none := func(mod func(*durablev1.RedriveDeadLettersRequest)) *durablev1.RedriveDeadLettersRequest {
		r := &durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{ActivityType: uid("no-such-type")}}
		mod(r)
		return r
	}
	one := []*durablev1.ActivityRef{{WorkflowId: "wf", ActivityId: "1"}}
	runBadInputs(t, c.RedriveDeadLetters, []badInput[*durablev1.RedriveDeadLettersRequest]{
		{"WorkflowIDTooLong", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Filter.WorkflowId = longID }), codes.InvalidArgument, "filter.workflow_id"},
		{"FailureTypeControlChar", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Filter.FailureType = "a\nb" }), codes.InvalidArgument, "filter.failure_type"},
		{"FingerprintOverLimit", none(func(r *durablev1.RedriveDeadLettersRequest) {
			r.Filter.FailureFingerprint = string(over(testMaxPayload))
		}), codes.InvalidArgument, "filter.failure_fingerprint"},
		{"WindowBackwards", none(func(r *durablev1.RedriveDeadLettersRequest) {
			r.Filter.DeadLetteredAfter, r.Filter.DeadLetteredBefore = t2, t1
		}), codes.InvalidArgument, "filter.dead_lettered_before"},
		{"WindowInvalidTime", none(func(r *durablev1.RedriveDeadLettersRequest) {
			r.Filter.DeadLetteredBefore = &timestamppb.Timestamp{Nanos: -1}
		}), codes.InvalidArgument, "filter.dead_lettered_before"},
		{"FilterAndList", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Activities = one }), codes.InvalidArgument, "activities"},
		{"WindowAndList", &durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{DeadLetteredAfter: t1}, Activities: one}, codes.InvalidArgument, "activities"},
		{"ListedWithoutActivityID", &durablev1.RedriveDeadLettersRequest{Activities: []*durablev1.ActivityRef{{WorkflowId: "wf"}}}, codes.InvalidArgument, "activities[0].activity_id"},
		{"RateNegative", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Rate = -1 }), codes.InvalidArgument, "rate"},
		{"RateNaN", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Rate = nan }), codes.InvalidArgument, "rate"},
		{"RateTooHigh", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Rate = maxRedriveRate + 1 }), codes.InvalidArgument, "rate"},
		{"ReasonControlChar", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Reason = "a\x1b[2J" }), codes.InvalidArgument, "reason"},
		{"EditSetsNothing", none(func(r *durablev1.RedriveDeadLettersRequest) { r.Edit = &durablev1.OptionsPatch{} }), codes.InvalidArgument, "edit"},
		{"EditNegativeInitial", none(func(r *durablev1.RedriveDeadLettersRequest) {
			v := int64(-1)
			r.Edit = &durablev1.OptionsPatch{InitialMs: &v}
		}), codes.InvalidArgument, "edit.initial_ms"},
		{"ValidWithEdit", none(func(r *durablev1.RedriveDeadLettersRequest) {
			r.Edit = &durablev1.OptionsPatch{MaxAttempts: &zero}
			r.Rate = maxRedriveRate
		}), codes.OK, ""},
		{"ValidWindow", none(func(r *durablev1.RedriveDeadLettersRequest) {
			r.Filter.DeadLetteredAfter, r.Filter.DeadLetteredBefore = t1, t2
		}), codes.OK, ""},
		{"ValidDryRun", none(func(r *durablev1.RedriveDeadLettersRequest) { r.DryRun = true }), codes.OK, ""},
	})
}

func TestOperationCalls_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	t.Run("Describe", func(t *testing.T) {
		runBadInputs(t, c.DescribeOperation, []badInput[*durablev1.DescribeOperationRequest]{
			{"MissingID", &durablev1.DescribeOperationRequest{}, codes.InvalidArgument, "id"},
			{"IDTooLong", &durablev1.DescribeOperationRequest{Id: longID}, codes.InvalidArgument, "id"},
			{"Unknown", &durablev1.DescribeOperationRequest{Id: "op-999999999"}, codes.NotFound, ""},
			{"Malformed", &durablev1.DescribeOperationRequest{Id: "nonsense"}, codes.NotFound, ""},
		})
	})
	t.Run("List", func(t *testing.T) {
		runBadInputs(t, c.ListOperations, []badInput[*durablev1.ListOperationsRequest]{
			{"NegativePageSize", &durablev1.ListOperationsRequest{PageSize: -1}, codes.InvalidArgument, "page_size"},
			{"PageTokenTooLong", &durablev1.ListOperationsRequest{NextPageToken: longToken}, codes.InvalidArgument, "next_page_token"},
			{"ForeignPageToken", &durablev1.ListOperationsRequest{NextPageToken: []byte("junk")}, codes.InvalidArgument, "next_page_token"},
			{"Empty", &durablev1.ListOperationsRequest{}, codes.OK, ""},
		})
	})
	t.Run("Cancel", func(t *testing.T) {
		runBadInputs(t, c.CancelOperation, []badInput[*durablev1.CancelOperationRequest]{
			{"MissingID", &durablev1.CancelOperationRequest{}, codes.InvalidArgument, "id"},
			{"ReasonTooLong", &durablev1.CancelOperationRequest{Id: "op-1", Reason: strings.Repeat("x", maxReasonLen+1)}, codes.InvalidArgument, "reason"},
			{"Unknown", &durablev1.CancelOperationRequest{Id: "op-999999999"}, codes.NotFound, ""},
		})
	})
}

func TestPollWorkflowTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.PollWorkflowTask, []badInput[*durablev1.PollWorkflowTaskRequest]{
		{"MissingTaskQueue", &durablev1.PollWorkflowTaskRequest{}, codes.InvalidArgument, "task_queue"},
		{"IdentityTooLong", &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: longID}, codes.InvalidArgument, "identity"},
	})
}

func TestPollActivityTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.PollActivityTask, []badInput[*durablev1.PollActivityTaskRequest]{
		{"MissingTaskQueue", &durablev1.PollActivityTaskRequest{}, codes.InvalidArgument, "task_queue"},
		{"NegativeMaxTasks", &durablev1.PollActivityTaskRequest{TaskQueue: "q", MaxTasks: -1}, codes.InvalidArgument, "max_tasks"},
		{"HugeMaxTasks", &durablev1.PollActivityTaskRequest{TaskQueue: "q", MaxTasks: maxPollTasks + 1}, codes.InvalidArgument, "max_tasks"},
		{"IdentityControlChar", &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w\r1"}, codes.InvalidArgument, "identity"},
	})
}

// schedule returns a valid ScheduleActivity command changed by mod.
func schedule(id string, mod func(*durablev1.Command)) *durablev1.Command {
	c := &durablev1.Command{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "A",
		ActivityOptions: &durablev1.ActivityOptions{
			StartToCloseTimeout: durationpb.New(time.Minute),
			RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 100, Backoff: 2, MaxIntervalMs: 1000, MaxAttempts: 3},
		},
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func timer(id string, d *durationpb.Duration) *durablev1.Command {
	return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: id, TimerDuration: d}
}

func policy(mod func(*durablev1.RetryPolicy)) func(*durablev1.Command) {
	return func(c *durablev1.Command) { mod(c.ActivityOptions.RetryPolicy) }
}

func TestCompleteWorkflowTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	tok := token(t, "wf-none", "")
	req := func(cmds ...*durablev1.Command) *durablev1.CompleteWorkflowTaskRequest {
		return &durablev1.CompleteWorkflowTaskRequest{TaskToken: tok, Commands: cmds}
	}
	complete := &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW}
	const ret = "commands[1].activity_options.retry_policy."
	runBadInputs(t, c.CompleteWorkflowTask, []badInput[*durablev1.CompleteWorkflowTaskRequest]{
		{"MissingTaskToken", &durablev1.CompleteWorkflowTaskRequest{}, codes.InvalidArgument, "task_token"},
		{"GarbageTaskToken", &durablev1.CompleteWorkflowTaskRequest{TaskToken: garbage}, codes.FailedPrecondition, ""},
		{"TokenWithoutWorkflowID", &durablev1.CompleteWorkflowTaskRequest{TaskToken: token(t, "", "")}, codes.InvalidArgument, "task_token"},
		{"ActivityTokenForWorkflowTask", &durablev1.CompleteWorkflowTaskRequest{TaskToken: token(t, "wf", "1")}, codes.InvalidArgument, "task_token"},
		{"TokenTooLong", &durablev1.CompleteWorkflowTaskRequest{TaskToken: longToken}, codes.InvalidArgument, "task_token"},
		{"UnspecifiedCommand", req(&durablev1.Command{}), codes.InvalidArgument, "commands[0].type"},
		{"UnknownCommand", req(schedule("1", nil), &durablev1.Command{Type: 99}), codes.InvalidArgument, "commands[1].type"},
		{"MissingActivityID", req(schedule("", nil)), codes.InvalidArgument, "commands[0].activity_id"},
		{"MissingActivityType", req(schedule("1", func(c *durablev1.Command) { c.ActivityType = "" })), codes.InvalidArgument, "commands[0].activity_type"},
		{"DuplicateActivityID", req(schedule("1", nil), schedule("2", nil), schedule("1", nil)), codes.InvalidArgument, "commands[2].activity_id"},
		{"InputOverLimit", req(schedule("1", func(c *durablev1.Command) { c.Input = over(testMaxPayload) })), codes.InvalidArgument, "commands[0].input"},
		{"NegativeStartToClose", req(schedule("1", func(c *durablev1.Command) {
			c.ActivityOptions.StartToCloseTimeout = durationpb.New(-time.Second)
		})), codes.InvalidArgument, "commands[0].activity_options.start_to_close_timeout"},
		{"AbsurdHeartbeatTimeout", req(schedule("1", func(c *durablev1.Command) {
			c.ActivityOptions.HeartbeatTimeout = durationpb.New(11 * 365 * 24 * time.Hour)
		})), codes.InvalidArgument, "commands[0].activity_options.heartbeat_timeout"},
		{"MalformedScheduleToStart", req(schedule("1", func(c *durablev1.Command) {
			c.ActivityOptions.ScheduleToStartTimeout = &durationpb.Duration{Seconds: 1, Nanos: -5}
		})), codes.InvalidArgument, "commands[0].activity_options.schedule_to_start_timeout"},
		{"NegativeScheduleToClose", req(schedule("1", func(c *durablev1.Command) {
			c.ActivityOptions.ScheduleToCloseTimeout = &durationpb.Duration{Nanos: -1}
		})), codes.InvalidArgument, "commands[0].activity_options.schedule_to_close_timeout"},
		{"OptionsTaskQueueTooLong", req(schedule("1", func(c *durablev1.Command) {
			c.ActivityOptions.TaskQueue = longID
		})), codes.InvalidArgument, "commands[0].activity_options.task_queue"},
		{"NaNBackoff", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = math.NaN() }))), codes.InvalidArgument, ret + "backoff"},
		{"InfBackoff", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = math.Inf(1) }))), codes.InvalidArgument, ret + "backoff"},
		{"NegativeInfBackoff", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = math.Inf(-1) }))), codes.InvalidArgument, ret + "backoff"},
		{"SlashInActivityID", req(schedule("a/b", nil)), codes.InvalidArgument, "commands[0].activity_id"},
		{"NegativeInitial", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.InitialMs = -1 }))), codes.InvalidArgument, ret + "initial_ms"},
		{"AbsurdInitial", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.InitialMs = math.MaxInt64 }))), codes.InvalidArgument, ret + "initial_ms"},
		{"NegativeMaxInterval", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.MaxIntervalMs = -1 }))), codes.InvalidArgument, ret + "max_interval_ms"},
		{"NegativeMaxAttempts", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.MaxAttempts = -1 }))), codes.InvalidArgument, ret + "max_attempts"},
		{"AbsurdMaxAttempts", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.MaxAttempts = maxAttempts + 1 }))), codes.InvalidArgument, ret + "max_attempts"},
		{"EmptyNonRetryableType", req(schedule("0", nil), schedule("1", policy(func(p *durablev1.RetryPolicy) { p.NonRetryable = []string{"Bad", ""} }))), codes.InvalidArgument, ret + "non_retryable[1]"},
		{"MissingTimerID", req(timer("", durationpb.New(time.Second))), codes.InvalidArgument, "commands[0].timer_id"},
		{"NegativeTimer", req(timer("t", durationpb.New(-time.Second))), codes.InvalidArgument, "commands[0].timer_duration"},
		{"AbsurdTimer", req(timer("t", &durationpb.Duration{Seconds: math.MaxInt64})), codes.InvalidArgument, "commands[0].timer_duration"},
		{"DuplicateTimerID", req(timer("t", nil), timer("t", nil)), codes.InvalidArgument, "commands[1].timer_id"},
		{"ResultOverLimit", req(&durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: over(testMaxPayload)}), codes.InvalidArgument, "commands[0].result"},
		{"FailureDetailsOverLimit", req(&durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW,
			Failure: &durablev1.Failure{Type: "E", Details: over(testMaxPayload)}}), codes.InvalidArgument, "commands[0].failure.details"},
		{"CommandAfterComplete", req(complete, schedule("1", nil)), codes.InvalidArgument, "commands[1]"},
		{"UnknownWorkflow", req(schedule("1", nil), timer("t", durationpb.New(time.Second))), codes.NotFound, ""},
		// A factor below 1 is unset, not wrong: these pass validation and
		// reach the engine, which does not know the workflow.
		{"NegativeBackoffIsUnset", req(schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = -2 }))), codes.NotFound, ""},
		{"FractionBackoffIsUnset", req(schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = 0.5 }))), codes.NotFound, ""},
	})
}

// TestValidator_BackoffAndActivityIDEdges: a growth factor below 1, negative
// ones included, is unset and passes; only NaN and infinities are refused,
// in a schedule's policy and in a patch alike. An activity id with '/' is
// refused with the reason, since it would let two activities share an
// idempotency key.
func TestValidator_BackoffAndActivityIDEdges(t *testing.T) {
	t.Parallel()
	v := validator{maxPayload: testMaxPayload}
	for _, tc := range []struct {
		name    string
		backoff float64
		refused bool
	}{
		{"Unset", 0, false},
		{"Fraction", 0.5, false},
		{"Negative", -2, false},
		{"HugeNegative", -math.MaxFloat64, false},
		{"One", 1, false},
		{"Usual", 2, false},
		{"NaN", math.NaN(), true},
		{"PlusInf", math.Inf(1), true},
		{"MinusInf", math.Inf(-1), true},
	} {
		t.Run("Backoff"+tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := schedule("1", policy(func(p *durablev1.RetryPolicy) { p.Backoff = tc.backoff }))
			errs := map[string]error{
				"commands[0].activity_options.retry_policy.backoff": v.commands([]*durablev1.Command{cmd}),
				"edit.backoff": v.optionsPatch("edit", &durablev1.OptionsPatch{Backoff: proto.Float64(tc.backoff)}),
			}
			for path, err := range errs {
				var fe *fieldError
				switch {
				case !tc.refused && err != nil:
					t.Errorf("backoff %v refused at %s: %v", tc.backoff, path, err)
				case tc.refused && (!errors.As(err, &fe) || fe.field != path):
					t.Errorf("backoff %v: err = %v, want one naming %s", tc.backoff, err, path)
				}
			}
		})
	}
	for _, tc := range []struct {
		id      string
		refused bool
	}{
		{"1", false},
		{"charge-card", false},
		{"a.b:c", false},
		{"b/c", true},
		{"/", true},
		{"trailing/", true},
	} {
		err := v.commands([]*durablev1.Command{schedule(tc.id, nil)})
		var fe *fieldError
		switch {
		case !tc.refused && err != nil:
			t.Errorf("activity id %q refused: %v", tc.id, err)
		case tc.refused && (!errors.As(err, &fe) || fe.field != "commands[0].activity_id" || !strings.Contains(fe.reason, "idempotency key")):
			t.Errorf("activity id %q: err = %v, want one naming commands[0].activity_id and the idempotency key", tc.id, err)
		}
	}
}

func TestFailWorkflowTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	tok := token(t, "wf-none", "")
	runBadInputs(t, c.FailWorkflowTask, []badInput[*durablev1.FailWorkflowTaskRequest]{
		{"MissingTaskToken", &durablev1.FailWorkflowTaskRequest{}, codes.InvalidArgument, "task_token"},
		{"GarbageTaskToken", &durablev1.FailWorkflowTaskRequest{TaskToken: garbage}, codes.FailedPrecondition, ""},
		{"FailureTypeTooLong", &durablev1.FailWorkflowTaskRequest{TaskToken: tok, Failure: &durablev1.Failure{Type: longID}}, codes.InvalidArgument, "failure.type"},
		{"FailureDetailsOverLimit", &durablev1.FailWorkflowTaskRequest{TaskToken: tok, Failure: &durablev1.Failure{Details: over(testMaxPayload)}}, codes.InvalidArgument, "failure.details"},
		{"UnknownWorkflow", &durablev1.FailWorkflowTaskRequest{TaskToken: tok, Failure: &durablev1.Failure{Type: "Panic"}}, codes.NotFound, ""},
	})
}

func TestCompleteActivityTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	tok := token(t, "wf-none", "1")
	runBadInputs(t, c.CompleteActivityTask, []badInput[*durablev1.CompleteActivityTaskRequest]{
		{"MissingTaskToken", &durablev1.CompleteActivityTaskRequest{}, codes.InvalidArgument, "task_token"},
		{"GarbageTaskToken", &durablev1.CompleteActivityTaskRequest{TaskToken: garbage}, codes.FailedPrecondition, ""},
		{"WorkflowTokenForActivityTask", &durablev1.CompleteActivityTaskRequest{TaskToken: token(t, "wf", "")}, codes.InvalidArgument, "task_token"},
		{"ResultOverLimit", &durablev1.CompleteActivityTaskRequest{TaskToken: tok, Result: over(testMaxPayload)}, codes.InvalidArgument, "result"},
		{"UnknownWorkflow", &durablev1.CompleteActivityTaskRequest{TaskToken: tok}, codes.NotFound, ""},
	})
}

func TestFailActivityTask_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	tok := token(t, "wf-none", "1")
	runBadInputs(t, c.FailActivityTask, []badInput[*durablev1.FailActivityRequest]{
		{"MissingTaskToken", &durablev1.FailActivityRequest{}, codes.InvalidArgument, "task_token"},
		{"GarbageTaskToken", &durablev1.FailActivityRequest{TaskToken: garbage}, codes.FailedPrecondition, ""},
		{"TokenWithoutWorkflowID", &durablev1.FailActivityRequest{TaskToken: token(t, "", "1")}, codes.InvalidArgument, "task_token"},
		{"FailureTypeControlChar", &durablev1.FailActivityRequest{TaskToken: tok, Failure: &durablev1.Failure{Type: "E\n"}}, codes.InvalidArgument, "failure.type"},
		{"FailureMessageOverLimit", &durablev1.FailActivityRequest{TaskToken: tok, Failure: &durablev1.Failure{Message: strings.Repeat("x", testMaxPayload+1)}}, codes.InvalidArgument, "failure.message"},
		{"FailureDetailsOverLimit", &durablev1.FailActivityRequest{TaskToken: tok, Failure: &durablev1.Failure{Details: over(testMaxPayload)}}, codes.InvalidArgument, "failure.details"},
		{"UnknownWorkflow", &durablev1.FailActivityRequest{TaskToken: tok, Failure: &durablev1.Failure{Type: "E"}}, codes.NotFound, ""},
	})
}

func TestRecordHeartbeat_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	tok := token(t, "wf-none", "1")
	runBadInputs(t, c.RecordHeartbeat, []badInput[*durablev1.HeartbeatRequest]{
		{"MissingTaskToken", &durablev1.HeartbeatRequest{}, codes.InvalidArgument, "task_token"},
		{"GarbageTaskToken", &durablev1.HeartbeatRequest{TaskToken: garbage}, codes.FailedPrecondition, ""},
		{"WorkflowTokenForActivityTask", &durablev1.HeartbeatRequest{TaskToken: token(t, "wf", "")}, codes.InvalidArgument, "task_token"},
		{"DetailsOverLimit", &durablev1.HeartbeatRequest{TaskToken: tok, Details: over(testMaxPayload)}, codes.InvalidArgument, "details"},
		{"IdentityTooLong", &durablev1.HeartbeatRequest{TaskToken: tok, Identity: longID}, codes.InvalidArgument, "identity"},
		{"UnknownWorkflow", &durablev1.HeartbeatRequest{TaskToken: tok, Details: []byte("ckpt")}, codes.NotFound, ""},
	})
}

func TestValidator_OptionsPatch(t *testing.T) {
	t.Parallel()
	v := validator{maxPayload: testMaxPayload}
	nan := math.NaN()
	cases := []struct {
		name  string
		patch *durablev1.OptionsPatch
		field string // "" when valid
	}{
		{"Nil", nil, ""},
		{"Empty", &durablev1.OptionsPatch{}, ""},
		{"Valid", &durablev1.OptionsPatch{MaxAttempts: proto.Int32(6), Backoff: proto.Float64(0.5), StartToCloseTimeout: durationpb.New(time.Minute)}, ""},
		{"NaNBackoff", &durablev1.OptionsPatch{Backoff: &nan}, "edit.backoff"},
		{"NegativeInitial", &durablev1.OptionsPatch{InitialMs: proto.Int64(-1)}, "edit.initial_ms"},
		{"TooManyAttempts", &durablev1.OptionsPatch{MaxAttempts: proto.Int32(maxAttempts + 1)}, "edit.max_attempts"},
		{"EmptyNonRetryableType", &durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{"A", ""}}}, "edit.non_retryable.values[1]"},
		{"NegativeTimeout", &durablev1.OptionsPatch{HeartbeatTimeout: durationpb.New(-time.Second)}, "edit.heartbeat_timeout"},
	}
	for _, tc := range cases {
		err := v.optionsPatch("edit", tc.patch)
		var fe *fieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.field != tc.field):
			t.Errorf("%s: err = %v, want one naming %s", tc.name, err, tc.field)
		}
	}
	if patchSetsSomething(&durablev1.OptionsPatch{}) || !patchSetsSomething(&durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{}}) {
		t.Error("patchSetsSomething misjudges presence")
	}
}

func TestSetPolicyOverride_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	typ := uid("PolicyType")
	ok := func(mod func(*durablev1.SetPolicyOverrideRequest)) *durablev1.SetPolicyOverrideRequest {
		r := &durablev1.SetPolicyOverrideRequest{ActivityType: typ, Patch: &durablev1.OptionsPatch{MaxAttempts: proto.Int32(6)}, Reason: "INC-7"}
		mod(r)
		return r
	}
	nan := math.NaN()
	runBadInputs(t, c.SetPolicyOverride, []badInput[*durablev1.SetPolicyOverrideRequest]{
		{"MissingActivityType", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.ActivityType = "" }), codes.InvalidArgument, "activity_type"},
		{"ActivityTypeTooLong", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.ActivityType = longID }), codes.InvalidArgument, "activity_type"},
		{"TaskQueueControlChar", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.TaskQueue = "q\n" }), codes.InvalidArgument, "task_queue"},
		{"NoPatch", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.Patch = nil }), codes.InvalidArgument, "patch"},
		{"PatchSetsNothing", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.Patch = &durablev1.OptionsPatch{} }), codes.InvalidArgument, "patch"},
		{"NaNBackoff", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.Patch = &durablev1.OptionsPatch{Backoff: &nan} }), codes.InvalidArgument, "patch.backoff"},
		{"TooManyAttempts", ok(func(r *durablev1.SetPolicyOverrideRequest) {
			r.Patch = &durablev1.OptionsPatch{MaxAttempts: proto.Int32(maxAttempts + 1)}
		}), codes.InvalidArgument, "patch.max_attempts"},
		{"NegativeStartToClose", ok(func(r *durablev1.SetPolicyOverrideRequest) {
			r.Patch = &durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(-time.Second)}
		}), codes.InvalidArgument, "patch.start_to_close_timeout"},
		{"ReasonTooLong", ok(func(r *durablev1.SetPolicyOverrideRequest) { r.Reason = strings.Repeat("x", maxReasonLen+1) }), codes.InvalidArgument, "reason"},
		{"EmptyNonRetryableClears", ok(func(r *durablev1.SetPolicyOverrideRequest) {
			r.Patch = &durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{}}
		}), codes.OK, ""},
		{"Valid", ok(func(*durablev1.SetPolicyOverrideRequest) {}), codes.OK, ""},
	})
}

func TestClearPolicyOverride_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ClearPolicyOverride, []badInput[*durablev1.ClearPolicyOverrideRequest]{
		{"MissingActivityType", &durablev1.ClearPolicyOverrideRequest{}, codes.InvalidArgument, "activity_type"},
		{"ReasonWithNewline", &durablev1.ClearPolicyOverrideRequest{ActivityType: "T", Reason: "a\nb"}, codes.InvalidArgument, "reason"},
		{"NotSet", &durablev1.ClearPolicyOverrideRequest{ActivityType: uid("Unset")}, codes.NotFound, ""},
	})
}

func TestListActivityStats_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListActivityStats, []badInput[*durablev1.ListActivityStatsRequest]{
		{"InvalidSince", &durablev1.ListActivityStatsRequest{Since: &timestamppb.Timestamp{Nanos: -1}}, codes.InvalidArgument, "since"},
		{"Since", &durablev1.ListActivityStatsRequest{Since: timestamppb.Now()}, codes.OK, ""},
		{"All", &durablev1.ListActivityStatsRequest{}, codes.OK, ""},
	})
}

func TestListTaskQueues_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListTaskQueues, []badInput[*durablev1.ListTaskQueuesRequest]{
		{"QueueWithNewline", &durablev1.ListTaskQueuesRequest{TaskQueue: "a\nb"}, codes.InvalidArgument, "task_queue"},
		{"One", &durablev1.ListTaskQueuesRequest{TaskQueue: "q"}, codes.OK, ""},
		{"All", &durablev1.ListTaskQueuesRequest{}, codes.OK, ""},
	})
}

func TestListNodes_BadInput(t *testing.T) {
	t.Parallel()
	c := setup(t)
	runBadInputs(t, c.ListNodes, []badInput[*durablev1.ListNodesRequest]{
		{"Empty", &durablev1.ListNodesRequest{}, codes.OK, ""},
	})
}

package server

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// validateAny runs the check of one request type; kind picks the type. It is
// the fuzz target's view of the validator.
func validateAny(kind uint8, data []byte) (proto.Message, error) {
	v := validator{maxPayload: testMaxPayload}
	checks := []struct {
		msg   proto.Message
		check func(proto.Message) error
	}{
		{&durablev1.CompleteWorkflowTaskRequest{}, func(m proto.Message) error { return v.completeWorkflowTask(m.(*durablev1.CompleteWorkflowTaskRequest)) }},
		{&durablev1.FailWorkflowTaskRequest{}, func(m proto.Message) error { return v.failWorkflowTask(m.(*durablev1.FailWorkflowTaskRequest)) }},
		{&durablev1.PollActivityTaskRequest{}, func(m proto.Message) error { return v.pollActivityTask(m.(*durablev1.PollActivityTaskRequest)) }},
		{&durablev1.HeartbeatRequest{}, func(m proto.Message) error { return v.recordHeartbeat(m.(*durablev1.HeartbeatRequest)) }},
		{&durablev1.FailActivityRequest{}, func(m proto.Message) error { return v.failActivityTask(m.(*durablev1.FailActivityRequest)) }},
		{&durablev1.CompleteActivityTaskRequest{}, func(m proto.Message) error { return v.completeActivityTask(m.(*durablev1.CompleteActivityTaskRequest)) }},
		{&durablev1.StartWorkflowRequest{}, func(m proto.Message) error { return v.startWorkflow(m.(*durablev1.StartWorkflowRequest)) }},
		{&durablev1.ListWorkflowsRequest{}, func(m proto.Message) error { return v.listWorkflows(m.(*durablev1.ListWorkflowsRequest)) }},
		{&durablev1.ListDeadLettersRequest{}, func(m proto.Message) error { return v.listDeadLetters(m.(*durablev1.ListDeadLettersRequest)) }},
		{&durablev1.RedriveDeadLetterRequest{}, func(m proto.Message) error { return v.redriveDeadLetter(m.(*durablev1.RedriveDeadLetterRequest)) }},
		{&durablev1.PollWorkflowTaskRequest{}, func(m proto.Message) error { return v.pollWorkflowTask(m.(*durablev1.PollWorkflowTaskRequest)) }},
		{&durablev1.DescribeWorkflowRequest{}, func(m proto.Message) error { return v.describeWorkflow(m.(*durablev1.DescribeWorkflowRequest)) }},
		{&durablev1.RedriveDeadLettersRequest{}, func(m proto.Message) error { return v.redriveDeadLetters(m.(*durablev1.RedriveDeadLettersRequest)) }},
		{&durablev1.ListAuditRecordsRequest{}, func(m proto.Message) error { return v.listAuditRecords(m.(*durablev1.ListAuditRecordsRequest)) }},
		{&durablev1.ListActivitiesRequest{}, func(m proto.Message) error { return v.listActivities(m.(*durablev1.ListActivitiesRequest)) }},
		{&durablev1.DescribeOperationRequest{}, func(m proto.Message) error { return v.describeOperation(m.(*durablev1.DescribeOperationRequest)) }},
		{&durablev1.ListOperationsRequest{}, func(m proto.Message) error { return v.listOperations(m.(*durablev1.ListOperationsRequest)) }},
		{&durablev1.CancelOperationRequest{}, func(m proto.Message) error { return v.cancelOperation(m.(*durablev1.CancelOperationRequest)) }},
		{&durablev1.SetPolicyOverrideRequest{}, func(m proto.Message) error { return v.setPolicyOverride(m.(*durablev1.SetPolicyOverrideRequest)) }},
		{&durablev1.ClearPolicyOverrideRequest{}, func(m proto.Message) error { return v.clearPolicyOverride(m.(*durablev1.ClearPolicyOverrideRequest)) }},
		{&durablev1.ListActivityStatsRequest{}, func(m proto.Message) error { return v.listActivityStats(m.(*durablev1.ListActivityStatsRequest)) }},
		{&durablev1.ListTaskQueuesRequest{}, func(m proto.Message) error { return v.listTaskQueues(m.(*durablev1.ListTaskQueuesRequest)) }},
		{&durablev1.GetWorkflowTaskHistoryRequest{}, func(m proto.Message) error {
			return v.getWorkflowTaskHistory(m.(*durablev1.GetWorkflowTaskHistoryRequest))
		}},
	}
	c := checks[int(kind)%len(checks)]
	if err := proto.Unmarshal(data, c.msg); err != nil {
		return nil, nil
	}
	return c.msg, c.check(c.msg)
}

// FuzzValidateRequest decodes arbitrary bytes as a request and validates it:
// validation must never panic, and every rejection must name a field.
func FuzzValidateRequest(f *testing.F) {
	// Seeds beyond the checked-in corpus under testdata/fuzz.
	for kind, m := range []proto.Message{
		&durablev1.CompleteWorkflowTaskRequest{Commands: []*durablev1.Command{schedule("1", nil), timer("t", nil)}},
		&durablev1.PollActivityTaskRequest{TaskQueue: "q", MaxTasks: 5},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind*2), b)
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		msg, err := validateAny(kind, data)
		if err == nil {
			return
		}
		var fe *fieldError
		if !errors.As(err, &fe) || fe.field == "" || fe.reason == "" {
			t.Fatalf("validation of %v returned %v, want a *fieldError naming a field", msg, err)
		}
	})
}

// Requests that cannot arrive over gRPC (nil, invalid UTF-8 that the client
// would refuse to marshal) still get InvalidArgument when a handler is called
// directly, and never reach the (here absent) engine.
func TestHandlersRejectWithoutEngine(t *testing.T) {
	t.Parallel()
	s := New(nil, Options{MaxPayload: testMaxPayload, TokenKey: testTokenKey})
	ctx := context.Background()
	calls := []struct {
		name  string
		call  func() error
		field string
	}{
		{"NilStartWorkflow", func() error { _, err := s.StartWorkflow(ctx, nil); return err }, "workflow_id"},
		{"InvalidUTF8WorkflowID", func() error {
			_, err := s.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "a\xffb", WorkflowType: "T", TaskQueue: "q"})
			return err
		}, "workflow_id"},
		{"InvalidUTF8FailureMessage", func() error {
			_, err := s.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: token(t, "wf", "1"), Failure: &durablev1.Failure{Message: "\xc3"}})
			return err
		}, "failure.message"},
		{"NilCompleteWorkflowTask", func() error { _, err := s.CompleteWorkflowTask(ctx, nil); return err }, "task_token"},
		{"NilCommand", func() error {
			_, err := s.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: token(t, "wf", ""), Commands: []*durablev1.Command{nil}})
			return err
		}, "commands[0].type"},
		{"NilPollActivityTask", func() error { _, err := s.PollActivityTask(ctx, nil); return err }, "task_queue"},
		{"NilRecordHeartbeat", func() error { _, err := s.RecordHeartbeat(ctx, nil); return err }, "task_token"},
		{"NilRedrive", func() error { _, err := s.RedriveDeadLetter(ctx, nil); return err }, "workflow_id"},
		{"NilRedriveMany", func() error {
			_, err := s.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Rate: -1})
			return err
		}, "rate"},
		{"ReasonWithNewline", func() error {
			_, err := s.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf", ActivityId: "1", Reason: "a\nfake log line"})
			return err
		}, "reason"},
		{"NilSetPolicyOverride", func() error { _, err := s.SetPolicyOverride(ctx, nil); return err }, "activity_type"},
		{"PolicyOverrideOfNothing", func() error {
			_, err := s.SetPolicyOverride(ctx, &durablev1.SetPolicyOverrideRequest{ActivityType: "T", Patch: &durablev1.OptionsPatch{}})
			return err
		}, "patch"},
		{"NilClearPolicyOverride", func() error { _, err := s.ClearPolicyOverride(ctx, nil); return err }, "activity_type"},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(tc.call())
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("code = %v (%q), want InvalidArgument", st.Code(), st.Message())
			}
			if want := tc.field + ": "; len(st.Message()) < len(want) || st.Message()[:len(want)] != want {
				t.Errorf("message %q does not name %q", st.Message(), tc.field)
			}
		})
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// TestIdsRejectInvisibleCharacters: an id that could make one workflow look
// like another is refused with InvalidArgument naming the field, the
// character and its position; plain ids of any script are accepted; and
// work stored before the rule can still be read and polled.
func TestIdsRejectInvisibleCharacters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := dial(t, testdaemon.Start(t, engine.Options{}))
	c := durablev1.NewDurableClient(conn)

	t.Run("WorkflowIDs", func(t *testing.T) {
		cases := []struct {
			name string
			id   string
			want string // in the message after "workflow_id: "; "" means accepted
		}{
			{"RightToLeftOverride", "invoice-\u202Efdp.exe", "U+202E RIGHT-TO-LEFT OVERRIDE (a format character) at byte offset 8 (character 8)"},
			{"ZeroWidthSpace", "order-42\u200B", "U+200B ZERO WIDTH SPACE (a format character) at byte offset 8"},
			{"ZeroWidthJoiner", "a\u200Db", "U+200D ZERO WIDTH JOINER"},
			{"ByteOrderMark", "\uFEFForder-42", "U+FEFF ZERO WIDTH NO-BREAK SPACE (byte order mark) (a format character) at byte offset 0"},
			{"NUL", "order\x0042", "U+0000 NULL (a control character) at byte offset 5"},
			{"Tab", "order\t42", "U+0009 CHARACTER TABULATION"},
			{"Newline", "order\n42", "U+000A LINE FEED"},
			{"OnlySpaces", "   ", "must not be only spaces"},
			{"TrailingSpace", "order-42 ", "must not end with a space"},
			{"Empty", "", "is required"},
			{"1001Bytes", strings.Repeat("x", 1001), "must be at most 1000 bytes, got 1001"},
			{"Unassigned", "order-\u0378", "U+0378 (an unassigned code point)"},
			{"PrivateUse", "order-\uE000", "U+E000 (a private-use character)"},
			{"LineSeparator", "order\u2028x", "U+2028 LINE SEPARATOR"},
			{"AccentedLatin", "commande-éàü-ñ", ""},
			{"CJK", "注文-東京-42", ""},
			{"Emoji", "deploy-🚀-ok", ""},
			{"HyphensDotsSlashes", "billing/eu-west.1/run_2:a b", ""},
			{"Exactly1000Bytes", strings.Repeat("y", 1000), ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: tc.id, WorkflowType: "T", TaskQueue: "q"})
				if tc.want == "" {
					if err != nil {
						t.Fatalf("StartWorkflow(%q) = %v, want accepted", tc.id, err)
					}
					return
				}
				wantRefused(t, err, "workflow_id", tc.want)
			})
		}
	})

	t.Run("InvalidUTF8", func(t *testing.T) {
		// Go's generated code will not marshal such a string, so the test
		// sends the bytes as another client could.
		str := func(b []byte, num protowire.Number, s string) []byte {
			return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
		}
		msg := func(b []byte, num protowire.Number, m []byte) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), m)
		}
		ref := func(wf, act string) []byte { return str(str(nil, 1, wf), 2, act) }
		cases := []struct {
			name, method string
			req          []byte
			field, want  string
		}{
			{"WorkflowID", durablev1.Durable_StartWorkflow_FullMethodName, str(str(str(nil, 1, "order-\xff"), 2, "T"), 3, "q"),
				"workflow_id", "must be valid UTF-8: byte 0xff at byte offset 6 (character 6) is not"},
			{"AfterMultiByte", durablev1.Durable_DescribeWorkflow_FullMethodName, str(nil, 1, "é\xc3"),
				"workflow_id", "byte 0xc3 at byte offset 2 (character 1)"},
			{"NestedInAList", durablev1.Durable_RedriveDeadLetters_FullMethodName, msg(msg(nil, 2, ref("w", "a")), 2, ref("w", "\xfe")),
				"activities[1].activity_id", "byte 0xfe at byte offset 0"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var resp rawMessage
				err := conn.Invoke(ctx, tc.method, rawMessage(tc.req), &resp, grpc.ForceCodec(rawCodec{}))
				wantRefused(t, err, tc.field, tc.want)
			})
		}
	})

	t.Run("OtherNewIDs", func(t *testing.T) {
		start := func(mod func(*durablev1.StartWorkflowRequest)) error {
			r := &durablev1.StartWorkflowRequest{WorkflowId: fmt.Sprintf("other-%d", time.Now().UnixNano()), WorkflowType: "T", TaskQueue: "q"}
			mod(r)
			_, err := c.StartWorkflow(ctx, r)
			return err
		}
		wantRefused(t, start(func(r *durablev1.StartWorkflowRequest) { r.WorkflowType = "Pay\u200Bment" }), "workflow_type", "U+200B")
		wantRefused(t, start(func(r *durablev1.StartWorkflowRequest) { r.TaskQueue = "payments\u2067" }), "task_queue", "U+2067 RIGHT-TO-LEFT ISOLATE")
		_, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "host\u202E:1"})
		wantRefused(t, err, "identity", "U+202E")
		_, err = c.SetPolicyOverride(ctx, &durablev1.SetPolicyOverrideRequest{ActivityType: "Charge\u00AD",
			Patch: &durablev1.OptionsPatch{MaxAttempts: ptr(int32(3))}})
		wantRefused(t, err, "activity_type", "U+00AD SOFT HYPHEN")

		// The commands of a workflow task: a worker names activities,
		// their types, queues and non-retryable failures, and timers.
		queue := "ids-commands"
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "ids-commands", WorkflowType: "T", TaskQueue: queue}); err != nil {
			t.Fatal(err)
		}
		task, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue})
		if err != nil || len(task.GetTaskToken()) == 0 {
			t.Fatalf("PollWorkflowTask = %v, %v", task, err)
		}
		commands := []struct {
			field, want string
			cmd         *durablev1.Command
		}{
			{"commands[0].activity_id", "U+202E", schedule(func(c *durablev1.Command) { c.ActivityId = "charge\u202E" })},
			{"commands[0].activity_type", "must not be only spaces", schedule(func(c *durablev1.Command) { c.ActivityType = "  " })},
			{"commands[0].activity_options.task_queue", "U+FEFF", schedule(func(c *durablev1.Command) { c.ActivityOptions.TaskQueue = "\uFEFFq" })},
			{"commands[0].activity_options.retry_policy.non_retryable[0]", "U+200D", schedule(func(c *durablev1.Command) {
				c.ActivityOptions.RetryPolicy = &durablev1.RetryPolicy{NonRetryable: []string{"Card\u200DDeclined"}}
			})},
			{"commands[0].timer_id", "U+200B", &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER,
				TimerId: "t\u200B", TimerDuration: durationpb.New(time.Second)}},
		}
		for _, tc := range commands {
			_, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: task.GetTaskToken(), Commands: []*durablev1.Command{tc.cmd}})
			wantRefused(t, err, tc.field, tc.want)
		}
	})
}

// TestIdsStoredBeforeTheRuleStayReadable: a store written before ids had to
// be plain (here by the engine directly, which does not validate) is served
// by durabled: the workflow can be described, its history read, its queue
// polled and its work carried on.
func TestIdsStoredBeforeTheRuleStayReadable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "data")
	const oldID, oldQueue = "invoice-\u202Efdp.exe", "pay\u200Bments"

	st, err := badgerstore.Open(dataDir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(st, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: oldID, WorkflowType: "T", TaskQueue: oldQueue}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	c := durablev1.NewDurableClient(dial(t, start(t, dataDir).Addr))
	if d, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: oldID}); err != nil || d.GetWorkflow().GetTaskQueue() != oldQueue {
		t.Fatalf("DescribeWorkflow(%q) = %v, %v", oldID, d, err)
	}
	if h, err := c.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: oldID}); err != nil || len(h.GetEvents()) == 0 {
		t.Fatalf("GetWorkflowHistory(%q) = %v, %v", oldID, h, err)
	}
	task, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: oldQueue})
	if err != nil || task.GetWorkflowId() != oldID {
		t.Fatalf("PollWorkflowTask(%q) = %v, %v; want the old workflow's task", oldQueue, task, err)
	}
	if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: task.GetTaskToken(),
		Commands: []*durablev1.Command{schedule(nil)}}); err != nil {
		t.Fatalf("CompleteWorkflowTask with plain ids for the old workflow: %v", err)
	}
	// A new workflow may not take such an id, even one that exists.
	_, err = c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: oldID, WorkflowType: "T", TaskQueue: "q"})
	wantRefused(t, err, "workflow_id", "U+202E")
}

// wantRefused checks that err is InvalidArgument for field with a message
// containing want.
func wantRefused(t *testing.T, err error, field, want string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("%s: code %v (%q), want InvalidArgument", field, st.Code(), st.Message())
	}
	if !strings.HasPrefix(st.Message(), field+": ") || !strings.Contains(st.Message(), want) {
		t.Errorf("message %q, want %q naming %s", st.Message(), want, field)
	}
}

// schedule is a valid ScheduleActivity command, changed by mod.
func schedule(mod func(*durablev1.Command)) *durablev1.Command {
	c := &durablev1.Command{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "charge", ActivityType: "Charge",
		ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute)},
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// rawMessage is a request or response as its wire bytes.
type rawMessage []byte

// rawCodec sends rawMessage as it is, so a test can send what Go's proto
// code would refuse to marshal.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(rawMessage), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*rawMessage) = append(rawMessage(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

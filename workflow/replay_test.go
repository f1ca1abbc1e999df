package workflow_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// hist builds a history, numbering events and stamping them a second apart.
func hist(events ...*durablev1.HistoryEvent) []*durablev1.HistoryEvent {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ev := range events {
		ev.EventId = int64(i + 1)
		ev.Time = timestamppb.New(t0.Add(time.Duration(i) * time.Second))
	}
	return events
}

func started(input string) *durablev1.HistoryEvent {
	return &durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, Input: []byte(input), WorkflowType: "W", TaskQueue: "q"}
}

func taskDone() []*durablev1.HistoryEvent {
	return []*durablev1.HistoryEvent{
		{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED},
		{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED},
		{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED},
	}
}

func scheduled(id, typ string) *durablev1.HistoryEvent {
	return &durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ActivityId: id, ActivityType: typ}
}

func completed(id, result string) *durablev1.HistoryEvent {
	return &durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED, ActivityId: id, Result: []byte(result)}
}

func concat(parts ...any) []*durablev1.HistoryEvent {
	var out []*durablev1.HistoryEvent
	for _, p := range parts {
		switch v := p.(type) {
		case *durablev1.HistoryEvent:
			out = append(out, v)
		case []*durablev1.HistoryEvent:
			out = append(out, v...)
		}
	}
	return hist(out...)
}

func execute(t *testing.T, fn any, h []*durablev1.HistoryEvent) workflow.TaskResult {
	t.Helper()
	def, err := workflow.NewDefinition(fn)
	if err != nil {
		t.Fatal(err)
	}
	return def.Execute(workflow.TaskParams{WorkflowID: "w1", WorkflowType: "W", TaskQueue: "q", Attempt: 1, History: h, Converter: client.JSON})
}

// twoSteps runs A, then B with A's result, and returns B's.
func twoSteps(ctx workflow.Context, in string) (string, error) {
	var a, b string
	if err := workflow.ExecuteActivity(ctx, "A", in).Get(ctx, &a); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(ctx, "B", a).Get(ctx, &b); err != nil {
		return "", err
	}
	return b, nil
}

func TestExecuteReplaysHistory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fn    any
		hist  []*durablev1.HistoryEvent
		want  []durablev1.CommandType
		check func(t *testing.T, cmds []*durablev1.Command)
	}{
		{
			name: "FirstTaskSchedulesA",
			fn:   twoSteps,
			hist: concat(started(`"x"`), taskDone()[0]),
			want: []durablev1.CommandType{durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY},
			check: func(t *testing.T, cmds []*durablev1.Command) {
				if cmds[0].GetActivityType() != "A" || cmds[0].GetActivityId() != "1" || string(cmds[0].GetInput()) != `"x"` {
					t.Fatalf("command = %v, want A id 1 input x", cmds[0])
				}
			},
		},
		{
			name: "AfterACompletedOnlyBIsNew",
			fn:   twoSteps,
			hist: concat(started(`"x"`), taskDone(), scheduled("1", "A"), completed("1", `"ax"`), taskDone()[0]),
			want: []durablev1.CommandType{durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY},
			check: func(t *testing.T, cmds []*durablev1.Command) {
				if cmds[0].GetActivityType() != "B" || cmds[0].GetActivityId() != "2" || string(cmds[0].GetInput()) != `"ax"` {
					t.Fatalf("command = %v, want B id 2 input ax", cmds[0])
				}
			},
		},
		{
			name: "BothDoneCompletes",
			fn:   twoSteps,
			hist: concat(started(`"x"`), taskDone(), scheduled("1", "A"), completed("1", `"ax"`), taskDone(),
				scheduled("2", "B"), completed("2", `"bax"`), taskDone()[0]),
			want: []durablev1.CommandType{durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW},
			check: func(t *testing.T, cmds []*durablev1.Command) {
				if string(cmds[0].GetResult()) != `"bax"` {
					t.Fatalf("result = %s, want bax", cmds[0].GetResult())
				}
			},
		},
		{
			name: "ActivityFailureFailsWorkflow",
			fn:   twoSteps,
			hist: concat(started(`"x"`), taskDone(), scheduled("1", "A"),
				&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED, ActivityId: "1",
					Failure: &durablev1.Failure{Type: "CardDeclined", Message: "no", NonRetryable: true}},
				taskDone()[0]),
			want: []durablev1.CommandType{durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW},
			check: func(t *testing.T, cmds []*durablev1.Command) {
				if f := cmds[0].GetFailure(); f.GetType() != "CardDeclined" || !f.GetNonRetryable() {
					t.Fatalf("failure = %v, want CardDeclined non-retryable", f)
				}
			},
		},
		{
			name: "DeadLetterKeepsWaiting",
			fn:   twoSteps,
			hist: concat(started(`"x"`), taskDone(), scheduled("1", "A"),
				&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED, ActivityId: "1"}),
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := execute(t, tt.fn, tt.hist)
			if res.Failure != nil {
				t.Fatalf("task failed: %v", res.Failure)
			}
			if len(res.Commands) != len(tt.want) {
				t.Fatalf("commands = %v, want types %v", res.Commands, tt.want)
			}
			for i, c := range res.Commands {
				if c.GetType() != tt.want[i] {
					t.Fatalf("command %d = %v, want %v", i, c.GetType(), tt.want[i])
				}
			}
			if tt.check != nil {
				tt.check(t, res.Commands)
			}
		})
	}
}

func TestExecuteFailsTheTask(t *testing.T) {
	t.Parallel()
	changed := func(ctx workflow.Context, in string) error {
		return workflow.ExecuteActivity(ctx, "Refund", in).Get(ctx, nil)
	}
	stops := func(ctx workflow.Context, in string) error {
		workflow.Await(ctx, func() bool { return false })
		return nil
	}
	panics := func(ctx workflow.Context) error { panic("bug") }
	afterA := concat(started(`"x"`), taskDone(), scheduled("1", "A"), taskDone()[0])
	tests := []struct {
		name     string
		fn       any
		hist     []*durablev1.HistoryEvent
		wantType string
		wantText []string
	}{
		{"OtherActivityType", changed, afterA, "NonDeterminism", []string{"A", "Refund", "id 1"}},
		{"MissingActivity", stops, afterA, "NonDeterminism", []string{"ActivityTaskScheduled", "A"}},
		{"Panic", panics, concat(started(""), taskDone()[0]), "Panic", []string{"bug"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := execute(t, tt.fn, tt.hist)
			if res.Failure.GetType() != tt.wantType {
				t.Fatalf("failure = %v, want type %s", res.Failure, tt.wantType)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(res.Failure.GetMessage(), s) {
					t.Errorf("message %q does not mention %q", res.Failure.GetMessage(), s)
				}
			}
		})
	}
}

// race starts a timer and an activity in coroutines and reports which
// finished first, through a Selector.
func race(ctx workflow.Context) (string, error) {
	timer := workflow.NewTimer(ctx, time.Minute)
	act := workflow.ExecuteActivity(ctx, "Slow", nil)
	var winner string
	done := false
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.NewSelector(ctx).
			AddFuture(timer, func(workflow.Future) { winner = "timer" }).
			AddFuture(act, func(workflow.Future) { winner = "activity" }).
			Select(ctx)
		done = true
	})
	workflow.Await(ctx, func() bool { return done })
	return winner + "@" + workflow.Now(ctx).Format("15:04:05"), nil
}

func TestTimersSelectorAndCoroutines(t *testing.T) {
	t.Parallel()
	h := concat(started(""), taskDone(), scheduled("2", "Slow"),
		&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_STARTED, TimerId: "1"},
		&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_FIRED, TimerId: "1"},
		taskDone()[0])
	// History lists the timer after the activity here, unlike the code: the
	// order of commands matters, so this is non-deterministic.
	if res := execute(t, race, h); res.Failure.GetType() != "NonDeterminism" {
		t.Fatalf("reordered commands: failure = %v, want NonDeterminism", res.Failure)
	}
	h = concat(started(""), taskDone(),
		&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_STARTED, TimerId: "1"},
		scheduled("2", "Slow"),
		&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_FIRED, TimerId: "1"},
		taskDone()[0])
	res := execute(t, race, h)
	if res.Failure != nil || len(res.Commands) != 1 {
		t.Fatalf("result = %v", res)
	}
	// The timer fired at event 7, 6 s after the start: Now is that time.
	if got := string(res.Commands[0].GetResult()); got != `"timer@00:00:06"` {
		t.Fatalf("result = %s, want timer@00:00:06", got)
	}
}

func TestExecuteFailsBlockedCode(t *testing.T) {
	// Not parallel: it changes the package's blocked limit.
	defer workflow.SetBlockedLimit(50 * time.Millisecond)()
	never := make(chan struct{})
	blocked := func(ctx workflow.Context) error {
		<-never // waits outside the workflow package
		return nil
	}
	res := execute(t, blocked, concat(started(""), taskDone()[0]))
	if res.Failure.GetType() != "Blocked" || !strings.Contains(res.Failure.GetMessage(), "main") {
		t.Fatalf("failure = %v, want Blocked naming the main coroutine", res.Failure)
	}
}

// firstOfTwo runs A and B, and then C named after whichever finished first.
func firstOfTwo(ctx workflow.Context) (string, error) {
	a := workflow.ExecuteActivity(ctx, "A", nil)
	b := workflow.ExecuteActivity(ctx, "B", nil)
	var first string
	workflow.NewSelector(ctx).
		AddFuture(a, func(workflow.Future) { first = "A" }).
		AddFuture(b, func(workflow.Future) { first = "B" }).
		Select(ctx)
	var out string
	err := workflow.ExecuteActivity(ctx, "After"+first, nil).Get(ctx, &out)
	return out, err
}

// TestReplaySeesOnlyEventsBeforeItsTask: B completed while the task that saw
// only A was running, so B's completion lies between that task's Started and
// Completed. Replay must decide as that task did (A first), not as if it had
// seen B too; a task that failed decides nothing.
func TestReplaySeesOnlyEventsBeforeItsTask(t *testing.T) {
	t.Parallel()
	wt := func(typ durablev1.EventType) *durablev1.HistoryEvent { return &durablev1.HistoryEvent{Type: typ} }
	h := concat(started(""), taskDone(), scheduled("1", "A"), scheduled("2", "B"),
		completed("1", `"a"`),
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED),
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED), // timed out: decided nothing
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED),
		completed("2", `"b"`), // arrived while the task ran
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
		scheduled("3", "AfterA"),
		completed("3", `"done"`),
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		wt(durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED))
	res := execute(t, firstOfTwo, h)
	if res.Failure != nil {
		t.Fatalf("replay failed: %v", res.Failure)
	}
	if len(res.Commands) != 1 || string(res.Commands[0].GetResult()) != `"done"` {
		t.Fatalf("commands = %v, want the workflow completed with \"done\"", res.Commands)
	}
}

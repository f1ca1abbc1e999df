package workflow_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// fanThenSleep fans out to three activities, sleeps, and runs one more with
// the sum of their results.
func fanThenSleep(ctx workflow.Context, n int) (int, error) {
	var fs []workflow.Future
	for i := range 3 {
		fs = append(fs, workflow.ExecuteActivity(ctx, "Add", n+i))
	}
	sum := 0
	for _, f := range fs {
		var v int
		if err := f.Get(ctx, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	workflow.Sleep(ctx, time.Minute)
	var out int
	err := workflow.ExecuteActivity(ctx, "Add", sum).Get(ctx, &out)
	return out, err
}

// daemon plays the daemon's part for these tests: it records a task's
// commands as events and appends what happens until the next task starts.
type daemon struct {
	t    *testing.T
	h    []*durablev1.HistoryEvent
	next time.Time
}

func (d *daemon) add(evs ...*durablev1.HistoryEvent) {
	for _, ev := range evs {
		ev.EventId = int64(len(d.h) + 1)
		ev.Time = timestamppb.New(d.next)
		d.next = d.next.Add(time.Second)
		d.h = append(d.h, ev)
	}
}

func (d *daemon) taskStarts() {
	d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED},
		&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED})
}

// record appends the task's completion and its commands' events, and
// returns the ids of the activities and timers it started.
func (d *daemon) record(cmds []*durablev1.Command) (acts, timers []string) {
	d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED})
	for _, c := range cmds {
		switch c.GetType() {
		case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
			d.add(scheduled(c.GetActivityId(), c.GetActivityType()))
			acts = append(acts, c.GetActivityId())
		case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
			d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_STARTED, TimerId: c.GetTimerId()})
			timers = append(timers, c.GetTimerId())
		}
	}
	return acts, timers
}

func params(h []*durablev1.HistoryEvent) workflow.TaskParams {
	return workflow.TaskParams{WorkflowID: "w1", WorkflowType: "W", TaskQueue: "q", Attempt: 1, History: h, Converter: client.JSON}
}

func TestContinueDecidesWhatAFullReplayDecides(t *testing.T) {
	t.Parallel()
	def, err := workflow.NewDefinition(fanThenSleep)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, next: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d.add(started(`10`))
	d.taskStarts()
	x, res := def.Start(params(slices.Clone(d.h)))
	defer x.Close()
	for task := 1; ; task++ {
		if res.Failure != nil {
			t.Fatalf("task %d failed: %v", task, res.Failure)
		}
		if !x.Reusable() {
			break
		}
		if task > 10 {
			t.Fatal("the workflow did not end in 10 tasks")
		}
		seen := x.LastEventID()
		acts, timers := d.record(res.Commands)
		// Results arrive in reverse order, one task each for the first.
		for i := len(acts) - 1; i >= 0; i-- {
			d.add(completed(acts[i], fmt.Sprint(100+i)))
			if i == len(acts)-1 && len(acts) > 1 {
				break // the others arrive for a later task
			}
		}
		for _, id := range timers {
			d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_TIMER_FIRED, TimerId: id})
		}
		if len(acts) > 1 {
			d.taskStarts()
			got, err := x.Continue(params(slices.Clone(d.h[seen:])))
			if err != nil {
				t.Fatal(err)
			}
			want := def.Execute(params(slices.Clone(d.h)))
			sameResult(t, task+1, got, want)
			acts2, _ := d.record(got.Commands)
			if len(acts2) != 0 {
				t.Fatalf("a task with one of three results scheduled %v", acts2)
			}
			seen = x.LastEventID()
			for i := len(acts) - 2; i >= 0; i-- {
				d.add(completed(acts[i], fmt.Sprint(100+i)))
			}
		}
		d.taskStarts()
		res, err = x.Continue(params(slices.Clone(d.h[seen:])))
		if err != nil {
			t.Fatal(err)
		}
		sameResult(t, task+1, res, def.Execute(params(slices.Clone(d.h))))
	}
	last := res.Commands[len(res.Commands)-1]
	if last.GetType() != durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW || string(last.GetResult()) != "100" {
		t.Fatalf("last command = %v, want the workflow completed with 100", last)
	}
	if _, err := x.Continue(params(nil)); err == nil {
		t.Error("Continue after the workflow ended succeeded")
	}
}

func sameResult(t *testing.T, task int, got, want workflow.TaskResult) {
	t.Helper()
	if len(got.Commands) != len(want.Commands) || !proto.Equal(got.Failure, want.Failure) {
		t.Fatalf("task %d: cached execution decided %v (failure %v); a replay decides %v (failure %v)", task, got.Commands, got.Failure, want.Commands, want.Failure)
	}
	for i := range got.Commands {
		if !proto.Equal(got.Commands[i], want.Commands[i]) {
			t.Fatalf("task %d command %d: cached execution %v, replay %v", task, i, got.Commands[i], want.Commands[i])
		}
	}
}

func TestContinueFailsWhenTheEventsDoNotRecordTheCommands(t *testing.T) {
	t.Parallel()
	def, err := workflow.NewDefinition(twoSteps)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, next: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d.add(started(`"x"`))
	d.taskStarts()
	x, res := def.Start(params(slices.Clone(d.h)))
	defer x.Close()
	if len(res.Commands) != 1 || res.Commands[0].GetActivityType() != "A" {
		t.Fatalf("first task = %v, want A scheduled", res.Commands)
	}
	seen := x.LastEventID()
	// The history says the task scheduled another activity than the code
	// did: the events are not the code's.
	d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED}, scheduled("1", "Other"), completed("1", `"o"`))
	d.taskStarts()
	res, err = x.Continue(params(slices.Clone(d.h[seen:])))
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure.GetType() != activity.TypeNonDeterminism {
		t.Fatalf("failure = %v, want %s", res.Failure, activity.TypeNonDeterminism)
	}
	if x.Reusable() {
		t.Error("the execution is still reusable after a non-determinism")
	}
	// A replay of the same history fails the same way.
	if f := def.Execute(params(slices.Clone(d.h))).Failure; f.GetType() != activity.TypeNonDeterminism {
		t.Errorf("replay failure = %v, want %s", f, activity.TypeNonDeterminism)
	}
}

func TestContinueRefusesEventsThatDoNotFollow(t *testing.T) {
	t.Parallel()
	def, err := workflow.NewDefinition(twoSteps)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, next: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d.add(started(`"x"`))
	d.taskStarts()
	x, _ := def.Start(params(slices.Clone(d.h)))
	defer x.Close()
	seen := x.LastEventID()
	d.add(&durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED}, scheduled("1", "A"), completed("1", `"a"`))
	d.taskStarts()
	if _, err := x.Continue(params(slices.Clone(d.h[seen+1:]))); !errors.Is(err, workflow.ErrHistoryGap) {
		t.Fatalf("Continue with an event missing = %v, want ErrHistoryGap", err)
	}
	if !x.Reusable() {
		t.Fatal("a refused gap spent the execution")
	}
	res, err := x.Continue(params(slices.Clone(d.h[seen:])))
	if err != nil || len(res.Commands) != 1 || res.Commands[0].GetActivityType() != "B" {
		t.Fatalf("Continue = %v, %v; want B scheduled", res, err)
	}
}

package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Definition is a workflow function checked for the right shape. Workers
// build one per registered workflow; authors do not need it.
type Definition struct {
	fn     reflect.Value
	in     reflect.Type // nil without input
	result bool
}

var (
	contextType = reflect.TypeFor[Context]()
	errorType   = reflect.TypeFor[error]()
)

// NewDefinition checks that fn has the shape func(Context[, T]) ([R,] error).
func NewDefinition(fn any) (*Definition, error) {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func {
		return nil, fmt.Errorf("workflow must be a function, got %T", fn)
	}
	if t.NumIn() < 1 || t.NumIn() > 2 || t.In(0) != contextType {
		return nil, fmt.Errorf("workflow %s must take (workflow.Context[, input]), got %s", t, t)
	}
	if t.NumOut() < 1 || t.NumOut() > 2 || t.Out(t.NumOut()-1) != errorType {
		return nil, fmt.Errorf("workflow %s must return ([result,] error)", t)
	}
	d := &Definition{fn: v, result: t.NumOut() == 2}
	if t.NumIn() == 2 {
		d.in = t.In(1)
	}
	return d, nil
}

// TaskParams is one workflow task as the worker polled it.
type TaskParams struct {
	WorkflowID   string
	WorkflowType string
	TaskQueue    string
	Attempt      int
	// History is the whole history, oldest first.
	History   []*durablev1.HistoryEvent
	Converter client.DataConverter
}

// TaskResult is what the worker reports: Commands to complete the task, or a
// Failure (panic, non-determinism) to fail it so that the daemon retries it.
type TaskResult struct {
	Commands []*durablev1.Command
	Failure  *durablev1.Failure
}

// Execute replays the history through the workflow function and returns the
// new commands of the current task.
func (d *Definition) Execute(p TaskParams) TaskResult {
	x, res := d.Start(p)
	x.Close()
	return res
}

// Execution is one workflow's state after a task ran: its coroutines, parked
// where the code waits, and what the code did. A worker keeps it between
// tasks so that the next task needs only the events that came after
// (Continue) rather than a replay of the whole history. Close it when done.
type Execution struct {
	e *env
	// last is the id of the last event applied: the current task's
	// WorkflowTaskStarted.
	last int64
	// spent: a task failed or the workflow closed; it cannot run another.
	spent bool
}

// Start replays a whole history through the workflow function and runs the
// current task, whose WorkflowTaskStarted is the last event.
func (d *Definition) Start(p TaskParams) (*Execution, TaskResult) {
	x := &Execution{e: newEnv(p)}
	e := x.e
	var input []byte
	if len(p.History) > 0 && p.History[0].GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		input = p.History[0].GetInput()
		e.info.StartTime = p.History[0].GetTime().AsTime()
		e.now = e.info.StartTime
	}
	e.d.spawn("main", func(co *coroutine) {
		ctx := &wfContext{env: e, co: co}
		e.result, e.err = d.call(ctx, input, e.conv)
		e.mainDone = true
	})
	return x, x.advance(p.History)
}

// ErrHistoryGap is returned by Continue when the events do not start right
// after the last event the execution saw: its state is not the one they
// follow, and the task must be run from the whole history.
var ErrHistoryGap = errors.New("workflow: the events do not follow the ones this execution saw")

// Continue runs the next task from the events after the previous task's
// WorkflowTaskStarted, through the current task's. The commands of the
// previous task are checked against the events that recorded them, as a
// replay checks every command; a mismatch fails the task with
// NonDeterminism. After a failure or the workflow's end the execution is
// spent (Reusable reports false).
func (x *Execution) Continue(p TaskParams) (TaskResult, error) {
	if !x.Reusable() {
		return TaskResult{}, errors.New("workflow: the execution cannot run another task")
	}
	if len(p.History) == 0 || p.History[0].GetEventId() != x.last+1 {
		return TaskResult{}, ErrHistoryGap
	}
	x.e.info.Attempt = p.Attempt
	return x.advance(p.History), nil
}

// LastEventID is the id of the last event the execution saw: the
// WorkflowTaskStarted of the task it ran last.
func (x *Execution) LastEventID() int64 { return x.last }

// Reusable reports whether the execution can run the workflow's next task:
// its last task succeeded and the workflow has not ended.
func (x *Execution) Reusable() bool { return !x.spent }

// Close ends the execution's coroutines. It is safe to call more than once.
func (x *Execution) Close() {
	x.spent = true
	x.e.d.close()
}

// advance applies events (those after the last one seen) and runs the code
// at the task they end with.
func (x *Execution) advance(events []*durablev1.HistoryEvent) TaskResult {
	res := x.apply(events)
	if res.Failure != nil || x.e.mainDone {
		x.spent = true
	}
	if n := len(events); n > 0 {
		x.last = events[n-1].GetEventId()
	}
	return res
}

func (x *Execution) apply(events []*durablev1.HistoryEvent) TaskResult {
	e := x.e
	// The command events join the recorded ones first: the code, run at a
	// past task's Started, meets the events its commands were recorded as
	// after that point. Commands the code made in a previous task of this
	// execution are checked against theirs here.
	made := len(e.history)
	for _, ev := range events {
		switch ev.GetType() {
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			e.scheduled[ev.GetEventId()] = len(e.history)
			e.history = append(e.history, recordedOf(ev))
		case durablev1.EventType_EVENT_TYPE_TIMER_STARTED:
			e.history = append(e.history, recordedOf(ev))
		}
	}
	for i := made; i < len(e.history) && i < len(e.commands); i++ {
		if msg, ok := matches(e.commands[i], e.history[i]); !ok {
			return e.nondeterministic(msg)
		}
		e.commands[i] = nil // checked: only its position matters now
	}
	stop := func() bool { return e.mainDone }

	// A past task saw exactly the events before its WorkflowTaskStarted: the
	// code runs there, and only for tasks that completed (a failed or timed
	// out task decided nothing).
	completed := completedTasks(events)
	e.replaying = true
	for i, ev := range events {
		switch ev.GetType() {
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if !completed[i] {
				continue
			}
			if !e.mainDone {
				e.d.run(stop)
			}
			if e.d.failure != nil {
				return e.failed()
			}
			continue
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
			durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED,
			durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			continue
		}
		if t := ev.GetTime(); t != nil {
			e.now = t.AsTime()
		}
		e.apply(ev)
	}
	e.replaying = false
	if !e.mainDone {
		e.d.run(stop)
	}
	if e.d.failure != nil {
		return e.failed()
	}
	if n := len(e.commands); n < len(e.history) {
		r := e.history[n]
		return e.nondeterministic(fmt.Sprintf("history event %d is %s, but the workflow code no longer does it (it made only %d of %d recorded calls)",
			r.eventID, r, n, len(e.history)))
	}
	// A copy: the commands stay the execution's, to be checked against
	// their events in the next task.
	cmds := slices.Clone(e.commands[len(e.history):])
	if e.mainDone {
		cmds = append(cmds, e.closeCommand())
	}
	return TaskResult{Commands: cmds}
}

// completedTasks marks the WorkflowTaskStarted events (by index) whose task
// went on to complete.
func completedTasks(history []*durablev1.HistoryEvent) map[int]bool {
	done := map[int]bool{}
	started := -1
	for i, ev := range history {
		switch ev.GetType() {
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED:
			started = i
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if started >= 0 {
				done[started] = true
			}
			started = -1
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED:
			started = -1
		}
	}
	return done
}

func (d *Definition) call(ctx *wfContext, input []byte, conv client.DataConverter) ([]byte, error) {
	args := []reflect.Value{reflect.ValueOf(Context(ctx))}
	if d.in != nil {
		v := reflect.New(d.in)
		if err := conv.FromPayload(input, v.Interface()); err != nil {
			return nil, activity.NewNonRetryable(activity.TypeBadInput, err.Error())
		}
		args = append(args, v.Elem())
	}
	out := d.fn.Call(args)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return nil, err
	}
	if !d.result {
		return nil, nil
	}
	b, err := conv.ToPayload(out[0].Interface())
	if err != nil {
		return nil, activity.NewNonRetryable(activity.TypeBadResult, err.Error())
	}
	return b, nil
}

// env is the state of one workflow task's replay.
type env struct {
	d         *dispatcher
	info      Info
	conv      client.DataConverter
	now       time.Time
	replaying bool
	seq       int
	coroSeq   int
	// history are the command events recorded (ActivityTaskScheduled,
	// TimerStarted) in order; commands are those the code made, nil once
	// checked against their event. scheduled indexes history by the event
	// id of each ActivityTaskScheduled.
	history    []recorded
	commands   []*durablev1.Command
	activities map[string]*future
	timers     map[string]*future
	scheduled  map[int64]int
	early      map[string]func(*future)
	mainDone   bool
	result     []byte
	err        error
}

func newEnv(p TaskParams) *env {
	conv := p.Converter
	if conv == nil {
		conv = client.JSON
	}
	e := &env{
		d:          newDispatcher(),
		conv:       conv,
		info:       Info{WorkflowID: p.WorkflowID, WorkflowType: p.WorkflowType, TaskQueue: p.TaskQueue, Attempt: p.Attempt},
		activities: map[string]*future{},
		timers:     map[string]*future{},
		scheduled:  map[int64]int{},
		early:      map[string]func(*future){},
	}
	return e
}

func (e *env) nextID() string {
	e.seq++
	return strconv.Itoa(e.seq)
}

func itoa(n int) string { return strconv.Itoa(n) }

// command records a command, checking it against the one history recorded
// at the same position.
func (e *env) command(c *durablev1.Command) {
	n := len(e.commands)
	e.commands = append(e.commands, c)
	if n >= len(e.history) {
		return
	}
	if msg, ok := matches(c, e.history[n]); !ok {
		panic(nondeterminism{msg: msg})
	}
	e.commands[n] = nil // checked: only its position matters now
}

// recorded is what an execution keeps of a command's event: what the checks
// and the lookups of results read, not its input and options, since an
// execution kept between tasks holds one for every activity the workflow
// ever scheduled.
type recorded struct {
	eventID       int64
	typ           durablev1.EventType
	activityID    string
	activityType  string
	timerID       string
	timerDuration time.Duration
}

func recordedOf(ev *durablev1.HistoryEvent) recorded {
	return recorded{
		eventID: ev.GetEventId(), typ: ev.GetType(),
		activityID: ev.GetActivityId(), activityType: ev.GetActivityType(),
		timerID: ev.GetTimerId(), timerDuration: ev.GetTimerDuration().AsDuration(),
	}
}

// matches checks a command against the event recorded at its position, and
// says how they differ when they do.
func matches(c *durablev1.Command, r recorded) (string, bool) {
	var ok bool
	switch c.GetType() {
	case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
		ok = r.typ == durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			r.activityID == c.GetActivityId() && r.activityType == c.GetActivityType()
	case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
		ok = r.typ == durablev1.EventType_EVENT_TYPE_TIMER_STARTED && r.timerID == c.GetTimerId()
	}
	if ok {
		return "", true
	}
	return fmt.Sprintf("history event %d is %s, but the workflow code now %s",
		r.eventID, r, describeCommand(c)), false
}

// String describes the event for a non-determinism message.
func (r recorded) String() string {
	switch r.typ {
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return fmt.Sprintf("ActivityTaskScheduled (activity %s, id %s)", r.activityType, r.activityID)
	case durablev1.EventType_EVENT_TYPE_TIMER_STARTED:
		return fmt.Sprintf("TimerStarted (timer id %s, %v)", r.timerID, r.timerDuration)
	}
	return r.typ.String()
}

func describeCommand(c *durablev1.Command) string {
	switch c.GetType() {
	case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
		return fmt.Sprintf("schedules activity %s (id %s)", c.GetActivityType(), c.GetActivityId())
	case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
		return fmt.Sprintf("starts a timer (id %s, %v)", c.GetTimerId(), c.GetTimerDuration().AsDuration())
	}
	return c.GetType().String()
}

// scheduledEvent is the ActivityTaskScheduled event with id, or the zero
// recorded when there is none.
func (e *env) scheduledEvent(id int64) recorded {
	if i, ok := e.scheduled[id]; ok {
		return e.history[i]
	}
	return recorded{}
}

// apply hands a result event to its future, or keeps it until the code
// creates that future.
func (e *env) apply(ev *durablev1.HistoryEvent) {
	id := ev.GetActivityId()
	if id == "" {
		id = e.scheduledEvent(ev.GetScheduledEventId()).activityID
	}
	var res func(*future)
	table := e.activities
	switch ev.GetType() {
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		res = func(f *future) { f.resolve(ev.GetResult(), nil) }
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED:
		typ := ev.GetActivityType()
		if typ == "" {
			typ = e.scheduledEvent(ev.GetScheduledEventId()).activityType
		}
		cause, ok := activity.ErrorFromFailure(ev.GetFailure()).(*activity.Error)
		if !ok {
			cause = &activity.Error{Type: activity.TypeUnknown, Message: "the daemon recorded no failure"}
		}
		err := &ActivityError{ActivityID: id, ActivityType: typ, Cause: cause}
		res = func(f *future) { f.resolve(nil, err) }
	case durablev1.EventType_EVENT_TYPE_TIMER_FIRED:
		id, table = ev.GetTimerId(), e.timers
		res = func(f *future) { f.resolve(nil, nil) }
	default:
		return // dead letters and redrives leave the future pending
	}
	if f, ok := table[id]; ok {
		res(f)
		return
	}
	e.early[id] = res
}

func (e *env) applyEarly(id string, f *future) {
	if res, ok := e.early[id]; ok {
		delete(e.early, id)
		res(f)
	}
}

func (e *env) closeCommand() *durablev1.Command {
	if e.err == nil {
		return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: e.result}
	}
	return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW, Failure: activity.FailureFromError(e.err)}
}

func (e *env) failed() TaskResult {
	f := e.d.failure
	return TaskResult{Failure: activity.FailureFromError(&activity.Error{Type: f.typ, Message: f.message, Details: f.details})}
}

func (e *env) nondeterministic(msg string) TaskResult {
	return TaskResult{Failure: activity.FailureFromError(activity.NewError(activity.TypeNonDeterminism, msg))}
}

package soak

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// What kind of wrong a problem is; the run fails on any.
const (
	// lost: something the daemon acknowledged is not in the recovered state.
	lost = "lost"
	// twice: something happened more than once.
	twice = "twice"
	// stuck: a workflow or operation did not finish once the faults ended.
	stuck = "stuck"
	// memory: durabled's resident set went over its bound.
	memory = "memory"
	// refused: a call failed in a way no restart explains, or the daemon
	// did not stop cleanly at the end.
	refused = "refused"
)

// problem is one difference between what was expected and what was found.
type problem struct {
	kind    string
	check   string // which rule
	subject string // a workflow, an activity key, an operation
	want    string
	got     string
}

// Event types, short.
const (
	evStarted       = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
	evCompleted     = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	evFailed        = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
	evScheduled     = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
	evActStarted    = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED
	evActCompleted  = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED
	evActFailed     = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED
	evDeadLettered  = durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED
	evRedriven      = durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN
	evTimerStarted  = durablev1.EventType_EVENT_TYPE_TIMER_STARTED
	evTimerFired    = durablev1.EventType_EVENT_TYPE_TIMER_FIRED
	statusRunning   = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	statusCompleted = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
	statusFailed    = durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED
)

// recovered is one workflow as the daemon has it after the run.
type recovered struct {
	info       *durablev1.WorkflowInfo
	history    []*durablev1.HistoryEvent
	activities map[string]*durablev1.PendingActivity // pending and finished, by activity id
	outcome    map[string]string                     // finished activities: completed, failed, workflow_closed

	scheduled map[string]*durablev1.HistoryEvent   // by activity id
	steps     map[string]Step                      // the input of each, by activity id
	ends      map[string][]*durablev1.HistoryEvent // ActivityTaskCompleted and ActivityTaskFailed
	started   map[string]*durablev1.HistoryEvent   // the ActivityTaskStarted before the end
	dead      map[string][]*durablev1.HistoryEvent
	redriven  map[string][]*durablev1.HistoryEvent
	timers    map[string]int // TimerStarted per timer id
	fired     map[string]int
	closes    []*durablev1.HistoryEvent
}

func newRecovered(d *durablev1.DescribeWorkflowResponse, hist []*durablev1.HistoryEvent) *recovered {
	w := &recovered{
		info: d.GetWorkflow(), history: hist,
		activities: map[string]*durablev1.PendingActivity{}, outcome: map[string]string{},
		scheduled: map[string]*durablev1.HistoryEvent{}, steps: map[string]Step{},
		ends: map[string][]*durablev1.HistoryEvent{}, started: map[string]*durablev1.HistoryEvent{},
		dead: map[string][]*durablev1.HistoryEvent{}, redriven: map[string][]*durablev1.HistoryEvent{},
		timers: map[string]int{}, fired: map[string]int{},
	}
	for _, a := range d.GetPendingActivities() {
		w.activities[a.GetActivityId()] = a
	}
	for _, f := range d.GetFinishedActivities() {
		w.activities[f.GetActivity().GetActivityId()] = f.GetActivity()
		w.outcome[f.GetActivity().GetActivityId()] = f.GetOutcome()
	}
	var lastStarted = map[string]*durablev1.HistoryEvent{}
	for _, e := range hist {
		id := e.GetActivityId()
		switch e.GetType() {
		case evScheduled:
			w.scheduled[id] = e
			var s Step
			if json.Unmarshal(e.GetInput(), &s) == nil {
				w.steps[id] = s
			}
		case evActStarted:
			lastStarted[id] = e
		case evActCompleted, evActFailed:
			w.ends[id] = append(w.ends[id], e)
			w.started[id] = lastStarted[id]
		case evDeadLettered:
			w.dead[id] = append(w.dead[id], e)
		case evRedriven:
			w.redriven[id] = append(w.redriven[id], e)
		case evTimerStarted:
			w.timers[e.GetTimerId()]++
		case evTimerFired:
			w.fired[e.GetTimerId()]++
		case evCompleted, evFailed:
			w.closes = append(w.closes, e)
		}
	}
	return w
}

func firstType(h []*durablev1.HistoryEvent) string {
	if len(h) == 0 {
		return "none"
	}
	return h[0].GetType().String()
}

func eventList(evs []*durablev1.HistoryEvent) string {
	if len(evs) == 0 {
		return "no such event"
	}
	var parts []string
	for _, e := range evs {
		s := fmt.Sprintf("#%d %s attempt %d", e.GetEventId(), strings.TrimPrefix(e.GetType().String(), "EVENT_TYPE_"), e.GetAttempt())
		if f := e.GetFailure(); f != nil {
			s += fmt.Sprintf(" %q", f.GetMessage())
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func trail(a *durablev1.PendingActivity) string {
	var parts []string
	for _, r := range a.GetAttempts() {
		s := fmt.Sprintf("attempt %d by %s", r.GetAttempt(), r.GetIdentity())
		if f := r.GetFailure(); f != nil {
			s += fmt.Sprintf(" %q", f.GetMessage())
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "an empty trail"
	}
	return "trail: " + strings.Join(parts, "; ")
}

// pendingSummary says what a running workflow waits for.
func pendingSummary(w *recovered) string {
	var parts []string
	for act, a := range w.activities {
		if _, finished := w.outcome[act]; finished {
			continue
		}
		s := fmt.Sprintf("%s %s %s attempt %d/%d", act, a.GetActivityType(), strings.TrimPrefix(a.GetState().String(), "ACTIVITY_STATE_"), a.GetAttempt(), a.GetMaxAttempts())
		if f := a.GetLastFailure(); f != nil {
			s += fmt.Sprintf(" last failure %s %q", f.GetType(), f.GetMessage())
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return fmt.Sprintf("no pending activity; last event %v", w.history[len(w.history)-1].GetType())
	}
	return strings.Join(parts, "; ")
}

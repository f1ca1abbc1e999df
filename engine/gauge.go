package engine

import (
	"cmp"
	"errors"
	"slices"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The engine counts activities per task queue and state in memory, so that
// metrics and consoles can read them without a scan. The counts are built
// from the records at start and then moved by every committed transition:
// each transition runs over a trackTx, which sees the state an activity had
// when the transition read it and the state it wrote.

// Gauges is a snapshot of what is waiting and who is waiting for it.
type Gauges struct {
	// Activities counts scheduled activities per task queue and state, dead
	// letters included; zero counts are left out.
	Activities []ActivityGauge
	// Polls counts the long polls parked per task queue and kind.
	Polls []PollGauge
	// Watchers is the number of open Watch streams.
	Watchers int
}

// ActivityGauge is how many activities of a task queue are in one state.
type ActivityGauge struct {
	TaskQueue string
	State     durablev1.ActivityState
	Count     int
}

// PollGauge is how many polls wait on one task queue for one kind of task.
type PollGauge struct {
	TaskQueue string
	Kind      TaskKind
	Parked    int
}

// Gauges returns the current counts, sorted by task queue.
// On a shared store the activity counts are every node's, read from the
// store; the polls are those parked on this node.
func (e *Engine) Gauges() Gauges {
	e.rt.readGauges(false)
	e.mu.Lock()
	defer e.mu.Unlock()
	var g Gauges
	for k, n := range e.counts {
		if n != 0 {
			g.Activities = append(g.Activities, ActivityGauge{TaskQueue: k.queue, State: k.state, Count: n})
		}
	}
	for k, ws := range e.waiters {
		if len(ws) > 0 {
			g.Polls = append(g.Polls, PollGauge{TaskQueue: k.queue, Kind: k.kind, Parked: len(ws)})
		}
	}
	g.Watchers = len(e.watchers)
	slices.SortFunc(g.Activities, func(a, b ActivityGauge) int {
		return cmp.Or(cmp.Compare(a.TaskQueue, b.TaskQueue), cmp.Compare(a.State, b.State))
	})
	slices.SortFunc(g.Polls, func(a, b PollGauge) int {
		return cmp.Or(cmp.Compare(a.TaskQueue, b.TaskQueue), cmp.Compare(a.Kind, b.Kind))
	})
	return g
}

// stateKey names one count: a task queue and a state.
type stateKey struct {
	queue string
	state durablev1.ActivityState
}

// stateMove is one activity leaving one count for another; a zero state on
// either side means it did not exist.
type stateMove struct {
	from, to stateKey
}

func countKey(a *durablev1.ActivityRecord) stateKey {
	return stateKey{queue: a.GetInfo().GetTaskQueue(), state: a.GetInfo().GetState()}
}

// countLocked applies committed moves to the counts.
func (e *Engine) countLocked(moves []stateMove) {
	for _, m := range moves {
		if m.from.state != 0 {
			e.counts[m.from]--
		}
		if m.to.state != 0 {
			e.counts[m.to]++
		}
	}
}

// trackTx is the Tx a transition runs over: it passes everything through and
// notes, for each activity the transition writes or deletes, the state it was
// read in and the state it leaves in.
type trackTx struct {
	Tx
	c    *change
	seen []seenActivity
	// seenWorkflows is where the workflows read stood in their queue's
	// books (taskqueue.go), by the same rule as seen.
	seenWorkflows []seenWorkflow
}

type seenActivity struct {
	workflowID, activityID string
	key                    stateKey
	spot                   taskSpot
}

type seenWorkflow struct {
	id   string
	spot taskSpot
}

func (t *trackTx) remember(a *durablev1.ActivityRecord) {
	wf, id := a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId()
	for i := range t.seen {
		if t.seen[i].workflowID == wf && t.seen[i].activityID == id {
			return // the first read is the state before the transition
		}
	}
	t.seen = append(t.seen, seenActivity{workflowID: wf, activityID: id, key: countKey(a), spot: activitySpot(a)})
}

// before returns the state an activity had before this transition wrote it
// (zero if it did not exist) and forgets it, so a second write counts from
// the first one's state.
func (t *trackTx) before(workflowID, activityID string) (stateKey, taskSpot, error) {
	for i := range t.seen {
		if s := &t.seen[i]; s.workflowID == workflowID && s.activityID == activityID {
			k, spot := s.key, s.spot
			t.seen = slices.Delete(t.seen, i, i+1)
			return k, spot, nil
		}
	}
	// Not read by this transition: a new activity, or a path that wrote
	// without reading. Read it, so the counts never drift.
	a, err := t.Tx.GetActivity(workflowID, activityID)
	if errors.Is(err, ErrNotFound) {
		return stateKey{}, taskSpot{}, nil
	}
	if err != nil {
		return stateKey{}, taskSpot{}, err
	}
	return countKey(a), activitySpot(a), nil
}

func (t *trackTx) GetActivity(workflowID, activityID string) (*durablev1.ActivityRecord, error) {
	a, err := t.Tx.GetActivity(workflowID, activityID)
	if err == nil {
		t.remember(a)
	}
	return a, err
}

func (t *trackTx) Activities(workflowID string) ([]*durablev1.ActivityRecord, error) {
	as, err := t.Tx.Activities(workflowID)
	for _, a := range as {
		t.remember(a)
	}
	return as, err
}

func (t *trackTx) PutActivity(a *durablev1.ActivityRecord) error {
	wf, id := a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId()
	from, fromSpot, err := t.before(wf, id)
	if err != nil {
		return err
	}
	if err := t.Tx.PutActivity(a); err != nil {
		return err
	}
	to, toSpot := countKey(a), activitySpot(a)
	t.seen = append(t.seen, seenActivity{workflowID: wf, activityID: id, key: to, spot: toSpot})
	if from != to {
		t.c.moves = append(t.c.moves, stateMove{from: from, to: to})
	}
	if fromSpot != toSpot {
		t.c.tasks = append(t.c.tasks, taskMove{kind: ActivityTask, workflowID: wf, activityID: id, from: fromSpot, to: toSpot})
	}
	return nil
}

func (t *trackTx) DeleteActivity(workflowID, activityID string) error {
	from, fromSpot, err := t.before(workflowID, activityID)
	if err != nil {
		return err
	}
	if err := t.Tx.DeleteActivity(workflowID, activityID); err != nil {
		return err
	}
	if from.state != 0 {
		t.c.moves = append(t.c.moves, stateMove{from: from})
	}
	if fromSpot != (taskSpot{}) {
		t.c.tasks = append(t.c.tasks, taskMove{kind: ActivityTask, workflowID: workflowID, activityID: activityID, from: fromSpot})
	}
	return nil
}

func (t *trackTx) GetWorkflow(id string) (*durablev1.WorkflowRecord, error) {
	w, err := t.Tx.GetWorkflow(id)
	// A workflow not found stands nowhere: a StartWorkflow that looked
	// first does not read it again when it writes it.
	if (err == nil || errors.Is(err, ErrNotFound)) && !slices.ContainsFunc(t.seenWorkflows, func(s seenWorkflow) bool { return s.id == id }) {
		t.seenWorkflows = append(t.seenWorkflows, seenWorkflow{id: id, spot: workflowSpot(w)})
	}
	return w, err
}

func (t *trackTx) PutWorkflow(w *durablev1.WorkflowRecord) error {
	id := w.GetInfo().GetWorkflowId()
	var from taskSpot
	if i := slices.IndexFunc(t.seenWorkflows, func(s seenWorkflow) bool { return s.id == id }); i >= 0 {
		from = t.seenWorkflows[i].spot
		t.seenWorkflows = slices.Delete(t.seenWorkflows, i, i+1)
	} else {
		// Written without a read through this Tx (a new workflow, or one
		// found by a scan): read where it stood.
		old, err := t.Tx.GetWorkflow(id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil {
			from = workflowSpot(old)
		}
	}
	showWorkflowTask(w)
	if err := t.Tx.PutWorkflow(w); err != nil {
		return err
	}
	to := workflowSpot(w)
	t.seenWorkflows = append(t.seenWorkflows, seenWorkflow{id: id, spot: to})
	if from != to {
		t.c.tasks = append(t.c.tasks, taskMove{kind: WorkflowTask, workflowID: id, from: from, to: to})
	}
	return nil
}

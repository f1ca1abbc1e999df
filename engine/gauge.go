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
func (e *Engine) Gauges() Gauges {
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
}

type seenActivity struct {
	workflowID, activityID string
	key                    stateKey
}

func (t *trackTx) remember(a *durablev1.ActivityRecord) {
	wf, id := a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId()
	for i := range t.seen {
		if t.seen[i].workflowID == wf && t.seen[i].activityID == id {
			return // the first read is the state before the transition
		}
	}
	t.seen = append(t.seen, seenActivity{workflowID: wf, activityID: id, key: countKey(a)})
}

// before returns the state an activity had before this transition wrote it
// (zero if it did not exist) and forgets it, so a second write counts from
// the first one's state.
func (t *trackTx) before(workflowID, activityID string) (stateKey, error) {
	for i := range t.seen {
		if s := &t.seen[i]; s.workflowID == workflowID && s.activityID == activityID {
			k := s.key
			t.seen = slices.Delete(t.seen, i, i+1)
			return k, nil
		}
	}
	// Not read by this transition: a new activity, or a path that wrote
	// without reading. Read it, so the counts never drift.
	a, err := t.Tx.GetActivity(workflowID, activityID)
	if errors.Is(err, ErrNotFound) {
		return stateKey{}, nil
	}
	if err != nil {
		return stateKey{}, err
	}
	return countKey(a), nil
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
	from, err := t.before(a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId())
	if err != nil {
		return err
	}
	if err := t.Tx.PutActivity(a); err != nil {
		return err
	}
	to := countKey(a)
	t.seen = append(t.seen, seenActivity{workflowID: a.GetInfo().GetWorkflowId(), activityID: a.GetInfo().GetActivityId(), key: to})
	if from != to {
		t.c.moves = append(t.c.moves, stateMove{from: from, to: to})
	}
	return nil
}

func (t *trackTx) DeleteActivity(workflowID, activityID string) error {
	from, err := t.before(workflowID, activityID)
	if err != nil {
		return err
	}
	if err := t.Tx.DeleteActivity(workflowID, activityID); err != nil {
		return err
	}
	if from.state != 0 {
		t.c.moves = append(t.c.moves, stateMove{from: from})
	}
	return nil
}

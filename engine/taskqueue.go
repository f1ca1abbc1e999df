package engine

import (
	"cmp"
	"context"
	"iter"
	"maps"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// The engine keeps, per task queue, the books an operator needs to tell a
// busy queue from a stuck one: the tasks queued in it with their due times,
// the activity attempts leased out per worker, and the workers that poll it.
// The first two are store state: rebuilt from the store at start and then
// moved by every committed transition (the trackTx notes where each task
// stood before and after it), like the counts of gauge.go. The due times
// are those of the tasks within the window of horizon.go; an activity task
// beyond it is counted as later from the counts. Pollers are not stored
// (on a shared store each node shares its own, runtime_shared.go): they
// start empty and are heard from again within a poll timeout.

const (
	// pollerForgetAfter is how long a poller that is not parked stays
	// listed after its last poll.
	pollerForgetAfter = 5 * time.Minute
	// pollerLiveWithin is how recently a poller that is not parked must
	// have polled to count as serving its queue. A worker that polls keeps
	// a poll parked or starts one within a poll timeout (20 s).
	pollerLiveWithin = time.Minute
)

// taskSpot is where one task stands in its queue's books: queued (due at
// due) or, for an activity attempt, leased to holder. The zero spot is
// outside the books.
type taskSpot struct {
	queue  string
	queued bool
	due    time.Time
	held   bool
	holder string
}

// taskMove is one task going from one spot to another.
type taskMove struct {
	kind                   TaskKind
	workflowID, activityID string
	from, to               taskSpot
}

func activitySpot(a *durablev1.ActivityRecord) taskSpot {
	in := a.GetInfo()
	s := taskSpot{queue: in.GetTaskQueue()}
	switch in.GetState() {
	case stateScheduled, stateRetrying:
		s.queued, s.due = true, in.GetNextAttemptTime().AsTime()
	case stateStarted:
		s.held, s.holder = true, in.GetLastWorkerIdentity()
	default:
		return taskSpot{}
	}
	return s
}

func workflowSpot(w *durablev1.WorkflowRecord) taskSpot {
	q, ok := WorkflowQueueEntryOf(w)
	if !ok || w.GetInfo().GetStatus() != statusRunning {
		return taskSpot{}
	}
	return taskSpot{queue: q.Queue, queued: true, due: q.Due}
}

type taskRef struct{ workflowID, activityID string }

// queueBook is one queue's tasks and leases.
type queueBook struct {
	queued [ActivityTask + 1]map[taskRef]time.Time // by kind
	leases map[string]int                          // worker identity → attempts held
}

func (b *queueBook) empty() bool {
	return len(b.queued[WorkflowTask]) == 0 && len(b.queued[ActivityTask]) == 0 && len(b.leases) == 0
}

type pollerKey struct {
	queue    string
	kind     TaskKind
	identity string
}

// pollerSeen is what the engine knows of one poller: its polls open now and
// when it last started or ended one.
type pollerSeen struct {
	parked int
	last   time.Time
}

// bookLocked applies committed moves to the books. An activity task queued
// beyond the window is not in them: it is counted as later from the
// activity counts (queuedBeyondLocked).
func (e *Engine) bookLocked(moves []taskMove) {
	for _, m := range moves {
		ref := taskRef{m.workflowID, m.activityID}
		if f := m.from; f.queued || f.held {
			b := e.books[f.queue]
			if b != nil {
				if f.queued {
					delete(b.queued[m.kind], ref)
				}
				if f.held {
					if b.leases[f.holder]--; b.leases[f.holder] <= 0 {
						delete(b.leases, f.holder)
					}
				}
				if b.empty() {
					delete(e.books, f.queue)
				}
			}
		}
		if t := m.to; t.queued || t.held {
			b := e.books[t.queue]
			if b == nil {
				b = &queueBook{leases: map[string]int{}}
				e.books[t.queue] = b
			}
			if t.queued && keepEntry(m.kind, t.due, e.horizon) {
				if b.queued[m.kind] == nil {
					b.queued[m.kind] = map[taskRef]time.Time{}
				}
				b.queued[m.kind][ref] = t.due
			}
			if t.held {
				b.leases[t.holder]++
			}
		}
	}
}

// pollStarted notes a poll opening on a queue and returns the function that
// notes it closing.
func (e *Engine) pollStarted(k queueKey, identity string) func() {
	pk := pollerKey{queue: k.queue, kind: k.kind, identity: identity}
	e.mu.Lock()
	p := e.pollers[pk]
	if p == nil {
		// A new poller is rare: forget the old ones now, so the table
		// stays as small as the workers alive.
		e.forgetPollersLocked(e.now())
		p = &pollerSeen{}
		e.pollers[pk] = p
	}
	p.parked++
	p.last = e.now()
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		p.parked--
		p.last = e.now()
		e.mu.Unlock()
	}
}

// forgetPollersLocked forgets the pollers not seen for pollerForgetAfter,
// except an activity poller that still holds leases on its queue: a worker
// whose every slot runs a long attempt does not poll, and is not gone.
func (e *Engine) forgetPollersLocked(now time.Time) {
	for k, p := range e.pollers {
		if p.parked <= 0 && now.Sub(p.last) > pollerForgetAfter && e.leasesLocked(k) == 0 {
			delete(e.pollers, k)
		}
	}
}

// leasesLocked is how many activity attempts a poller holds on its queue.
func (e *Engine) leasesLocked(k pollerKey) int {
	if k.kind != ActivityTask {
		return 0
	}
	if b := e.books[k.queue]; b != nil {
		return b.leases[k.identity]
	}
	return 0
}

// ListTaskQueues returns the task queues as the engine sees them now. It
// reads only memory (and the window's next stretch when it is time to move
// it, see horizon.go): its cost is the tasks queued within the window, not
// the store. On a shared store the tasks and leases are read from the store
// (runtime_shared.go), and the pollers are this node's merged with those
// the other live nodes shared, a few seconds old (sharePollers).
func (e *Engine) ListTaskQueues(ctx context.Context, req *durablev1.ListTaskQueuesRequest) (*durablev1.ListTaskQueuesResponse, error) {
	// Tasks that fell due beyond the window count as ready once it has
	// moved on; should it fail to, they still count, as later.
	_ = e.ensureHorizon()
	e.rt.readGauges(true)
	now := e.now()
	e.mu.Lock()
	qs := e.taskQueuesLocked(now)
	e.mu.Unlock()
	if name := req.GetTaskQueue(); name != "" {
		qs = slices.DeleteFunc(qs, func(q *durablev1.TaskQueue) bool { return q.GetName() != name })
	}
	return &durablev1.ListTaskQueuesResponse{TaskQueues: qs, ServerTime: ts(now)}, nil
}

func (e *Engine) taskQueuesLocked(now time.Time) []*durablev1.TaskQueue {
	e.forgetPollersLocked(now)
	pollers := mergePollers(e.ownPollersLocked(), e.rt.otherPollersLocked())
	for i, p := range pollers {
		pollers[i].Leases = e.leasesLocked(pollerKey{queue: p.Queue, kind: p.Kind, identity: p.Identity})
	}
	books := make(map[string]QueueBook, len(e.books))
	for name, b := range e.books {
		books[name] = QueueBook{
			WorkflowTasks: maps.Values(b.queued[WorkflowTask]),
			ActivityTasks: maps.Values(b.queued[ActivityTask]),
			Leases:        b.leases,
		}
	}
	for name, n := range e.queuedBeyondLocked() {
		b := books[name]
		b.ActivitiesBeyond = n
		books[name] = b
	}
	return SummarizeQueues(books, pollers, now)
}

// ownPollersLocked is the pollers this engine has seen.
func (e *Engine) ownPollersLocked() []PollerState {
	ps := make([]PollerState, 0, len(e.pollers))
	for k, p := range e.pollers {
		ps = append(ps, PollerState{Queue: k.queue, Kind: k.kind, Identity: k.identity, Parked: p.parked > 0, Last: p.last})
	}
	return ps
}

// mergePollers is own and what other nodes saw of the same workers, one
// entry per worker, queue and kind: parked if a poll of it is open on any
// node, last polled at its latest poll on any.
func mergePollers(own, others []PollerState) []PollerState {
	if len(others) == 0 {
		return own
	}
	at := make(map[pollerKey]int, len(own))
	for i, p := range own {
		at[pollerKey{queue: p.Queue, kind: p.Kind, identity: p.Identity}] = i
	}
	for _, p := range others {
		k := pollerKey{queue: p.Queue, kind: p.Kind, identity: p.Identity}
		i, ok := at[k]
		if !ok {
			at[k] = len(own)
			own = append(own, p)
			continue
		}
		own[i].Parked = own[i].Parked || p.Parked
		if p.Last.After(own[i].Last) {
			own[i].Last = p.Last
		}
	}
	return own
}

// PollerState is one poller as SummarizeQueues reads it.
type PollerState struct {
	Queue    string
	Kind     TaskKind
	Identity string
	Parked   bool
	Last     time.Time
	// Leases is how many activity attempts it holds on the queue.
	Leases int
}

// QueueBook is one queue's queued tasks (their due times, read once) and
// leases per worker, as SummarizeQueues reads them. ActivitiesBeyond counts
// the activity tasks queued beyond the engine's window, whose due times it
// does not hold: all of them are later.
type QueueBook struct {
	WorkflowTasks, ActivityTasks iter.Seq[time.Time]
	ActivitiesBeyond             int
	Leases                       map[string]int
}

// Live reports whether a poller serves its queue at now: it has a poll
// parked, polled within pollerLiveWithin, or holds leases on the queue (a
// worker polls only while it has a free slot: one whose slots all run
// attempts is busy, not gone; if it died, its leases time out and it stops
// counting).
func (p PollerState) Live(now time.Time) bool {
	return p.Parked || now.Sub(p.Last) <= pollerLiveWithin || p.Leases > 0
}

// SummarizeQueues is the rule of ListTaskQueues: per queue (sorted by name)
// its pollers, the tasks ready (due at or before now) and later, the oldest
// ready, the leases per worker, and whether ready work has no live poller
// of its kind.
func SummarizeQueues(books map[string]QueueBook, pollers []PollerState, now time.Time) []*durablev1.TaskQueue {
	byName := map[string]*durablev1.TaskQueue{}
	get := func(name string) *durablev1.TaskQueue {
		q := byName[name]
		if q == nil {
			q = &durablev1.TaskQueue{Name: name, WorkflowTasks: &durablev1.TaskBacklog{}, ActivityTasks: &durablev1.TaskBacklog{}}
			byName[name] = q
		}
		return q
	}
	live := map[pollerKey]bool{} // queue and kind, identity empty
	for _, p := range pollers {
		q := get(p.Queue)
		q.Pollers = append(q.Pollers, &durablev1.Poller{Identity: p.Identity, Kind: wireKind(p.Kind), LastPollTime: ts(p.Last), Parked: p.Parked})
		if p.Live(now) {
			live[pollerKey{queue: p.Queue, kind: p.Kind}] = true
		}
	}
	for name, b := range books {
		q := get(name)
		q.WorkflowTasks = backlog(b.WorkflowTasks, now)
		q.ActivityTasks = backlog(b.ActivityTasks, now)
		q.ActivityTasks.Later += int64(b.ActivitiesBeyond)
		for id, n := range b.Leases {
			q.Leases = append(q.Leases, &durablev1.WorkerLeases{Identity: id, Activities: int64(n)})
		}
		slices.SortFunc(q.Leases, func(a, b *durablev1.WorkerLeases) int { return cmp.Compare(a.GetIdentity(), b.GetIdentity()) })
	}
	out := make([]*durablev1.TaskQueue, 0, len(byName))
	for name, q := range byName {
		q.WorkflowTasks.Stalled = q.WorkflowTasks.GetReady() > 0 && !live[pollerKey{queue: name, kind: WorkflowTask}]
		q.ActivityTasks.Stalled = q.ActivityTasks.GetReady() > 0 && !live[pollerKey{queue: name, kind: ActivityTask}]
		q.Stalled = q.WorkflowTasks.Stalled || q.ActivityTasks.Stalled
		slices.SortFunc(q.Pollers, func(a, b *durablev1.Poller) int {
			return cmp.Or(cmp.Compare(a.GetKind(), b.GetKind()), cmp.Compare(a.GetIdentity(), b.GetIdentity()))
		})
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *durablev1.TaskQueue) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

func backlog(due iter.Seq[time.Time], now time.Time) *durablev1.TaskBacklog {
	b := &durablev1.TaskBacklog{}
	if due == nil {
		return b
	}
	var oldest time.Time
	for d := range due {
		if d.After(now) {
			b.Later++
			continue
		}
		b.Ready++
		if oldest.IsZero() || d.Before(oldest) {
			oldest = d
		}
	}
	if !oldest.IsZero() {
		b.OldestReadyTime = ts(oldest)
	}
	return b
}

func wireKind(k TaskKind) durablev1.TaskKind {
	switch k {
	case WorkflowTask:
		return durablev1.TaskKind_TASK_KIND_WORKFLOW
	case ActivityTask:
		return durablev1.TaskKind_TASK_KIND_ACTIVITY
	}
	return durablev1.TaskKind_TASK_KIND_UNSPECIFIED
}

// showWorkflowTask sets the workflow task fields of a workflow's info from
// its record: when its task became due while one waits for a worker, and
// its attempt. Every write of a workflow sets them (trackTx), so watchers
// see them; reads set them too, for records written before they existed.
func showWorkflowTask(w *durablev1.WorkflowRecord) {
	in := w.GetInfo()
	if in == nil {
		return
	}
	if w.GetWtState() == wtScheduled && in.GetStatus() == statusRunning {
		in.WorkflowTaskReadyTime, in.WorkflowTaskAttempt = w.GetWtDue(), w.GetWtAttempt()
		return
	}
	in.WorkflowTaskReadyTime, in.WorkflowTaskAttempt = nil, 0
}

// Watchers hear of the task queues as a whole list, at most once every
// queuesShowEvery and only when the list changed in what it says (pollers
// come or go or park, counts, oldest, stalled). A poll time alone changes
// with every poll; it is sent with the next other change, or after
// queuesRefreshEvery.
const (
	queuesShowEvery    = time.Second
	queuesRefreshEvery = 10 * time.Second
)

// queueShower is the goroutine that sends watchers the task queues: each
// watcher gets the list when it differs from the last one it got (in its
// snapshot or from here).
func (e *Engine) queueShower() {
	defer close(e.queuesDone)
	for {
		select {
		case <-e.clock.After(queuesShowEvery):
		case <-e.closeCh:
			return
		}
		_ = e.ensureHorizon() // as in ListTaskQueues
		e.mu.Lock()
		if len(e.watchers) > 0 {
			now := e.now()
			qs := e.taskQueuesLocked(now)
			var ev *durablev1.WatchEvent
			for w := range e.watchers {
				// A watcher whose snapshot still streams gets the list
				// in its SNAPSHOT_DONE, taken after everything queued
				// here; a list queued before it would follow it, older.
				if w.queuesAt.IsZero() || sameQueues(w.queues, qs, now.Sub(w.queuesAt) < queuesRefreshEvery) {
					continue
				}
				if ev == nil {
					ev = &durablev1.WatchEvent{
						Kind:       durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
						ServerTime: ts(now),
						TaskQueues: &durablev1.TaskQueueList{TaskQueues: qs},
					}
				}
				w.queues, w.queuesAt = qs, now
				e.queueLocked(w, ev)
			}
		}
		e.mu.Unlock()
	}
}

// sameQueues reports whether two lists say the same, poll times aside
// when ignorePollTimes.
func sameQueues(a, b []*durablev1.TaskQueue, ignorePollTimes bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if ignorePollTimes {
			x, y = withoutPollTimes(x), withoutPollTimes(y)
		}
		if !proto.Equal(x, y) {
			return false
		}
	}
	return true
}

func withoutPollTimes(q *durablev1.TaskQueue) *durablev1.TaskQueue {
	q = proto.CloneOf(q)
	for _, p := range q.GetPollers() {
		p.LastPollTime = nil
	}
	return q
}

package tui

import (
	"github.com/tinyllm/durable/client"
	"slices"
	"sort"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// activityKey identifies an activity across workflows.
func activityKey(workflowID, activityID string) string {
	return workflowID + "\x00" + activityID
}

func keyOf(a *durablev1.PendingActivity) string {
	return activityKey(a.GetWorkflowId(), a.GetActivityId())
}

// naturalLess orders "2" before "10", so the SDK's sequential activity ids
// read in the order they were scheduled.
func naturalLess(a, b string) bool {
	if len(a) != len(b) && allDigits(a) && allDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func attemptsLess(a, b *durablev1.PendingActivity) bool {
	if a.GetWorkflowId() != b.GetWorkflowId() {
		return a.GetWorkflowId() < b.GetWorkflowId()
	}
	return naturalLess(a.GetActivityId(), b.GetActivityId())
}

// deadLess puts the newest dead letter first.
func deadLess(a, b *durablev1.PendingActivity) bool {
	ta, tb := a.GetDeadLetteredTime().AsTime(), b.GetDeadLetteredTime().AsTime()
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return attemptsLess(a, b)
}

// workflowLess puts the newest workflow first.
func workflowLess(a, b *durablev1.WorkflowInfo) bool {
	ta, tb := a.GetStartTime().AsTime(), b.GetStartTime().AsTime()
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.GetWorkflowId() < b.GetWorkflowId()
}

// failureGroup is every shown dead letter with one failure type, or with
// one fingerprint (the type and the message but for its numbers, ids and
// addresses): one outage is one line.
type failureGroup struct {
	// key is the failure type, or the fingerprint when grouped by it.
	key string
	// typ is the failure type of every member.
	typ     string
	members *sortedSet[*durablev1.PendingActivity] // deadLess: first is newest
}

// byPrint reports whether the group is a fingerprint's.
func (g *failureGroup) byPrint() bool { return g.key != g.typ }

func (g *failureGroup) count() int { return g.members.Len() }

func (g *failureGroup) lastSeen() time.Time {
	return g.members.At(0).GetDeadLetteredTime().AsTime()
}

func (g *failureGroup) firstSeen() time.Time {
	return g.members.At(g.members.Len() - 1).GetDeadLetteredTime().AsTime()
}

// failureType is a's failure type, noFailureType for none.
func failureType(a *durablev1.PendingActivity) string {
	if t := a.GetLastFailure().GetType(); t != "" {
		return t
	}
	return noFailureType
}

// groupKey is the group a falls in: its failure type, or its fingerprint
// when the list groups by fingerprint (a letter without a failure has
// none, and falls in its type's group).
func (l *activityList) groupKey(a *durablev1.PendingActivity) string {
	if l.byPrint && a.GetLastFailure() != nil {
		return client.FingerprintOf(a)
	}
	return failureType(a)
}

// newGroup is the empty group of a's key.
func (l *activityList) newGroup(a *durablev1.PendingActivity) *failureGroup {
	return &failureGroup{key: l.groupKey(a), typ: failureType(a), members: newSortedSet(deadLess)}
}

// activityList is one view's filtered, ordered activities.
type activityList struct {
	filter   filter
	onlyDead bool
	set      *sortedSet[*durablev1.PendingActivity]
	// Dead letters only: groups by failure type (by fingerprint with
	// byPrint), largest first.
	groups     map[string]*failureGroup
	groupOrder []*failureGroup
	byPrint    bool
	// The home view only: its order, whether it leaves dead letters to
	// their own screen, and the urgency each row was placed with.
	home homeOrder
	// queues are the daemon's task queues, for the nopoller word.
	queues *queues
}

func newActivityList(onlyDead bool, f filter, q *queues) *activityList {
	l := &activityList{filter: f, onlyDead: onlyDead, queues: q}
	if onlyDead {
		l.set = newSortedSet(deadLess)
		l.groups = make(map[string]*failureGroup)
		return l
	}
	l.home.rank = make(map[*durablev1.PendingActivity]urgency)
	l.set = newSortedSet(l.home.less)
	return l
}

func (l *activityList) wants(a *durablev1.PendingActivity, now time.Time) bool {
	if l.onlyDead && a.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		return false
	}
	if l.home.hideDead && isDead(a) {
		return false
	}
	return l.filter.matchActivity(a, now, l.queues)
}

// put applies the new version of an activity (nil: it is gone) and reports
// whether the group order needs sorting.
func (l *activityList) put(key string, old, a *durablev1.PendingActivity, now time.Time) bool {
	regroup := false
	if old != nil {
		gone, ok := l.set.Remove(key)
		if ok && l.home.rank != nil {
			delete(l.home.rank, gone)
		}
		if ok && l.groups != nil {
			gk := l.groupKey(old)
			if g := l.groups[gk]; g != nil {
				g.members.Remove(key)
				if g.count() == 0 {
					delete(l.groups, gk)
				}
				regroup = true
			}
		}
	}
	if a != nil && l.wants(a, now) {
		if l.home.rank != nil {
			l.home.place(key, a)
		}
		l.set.Upsert(key, a)
		if l.groups != nil {
			gk := l.groupKey(a)
			g := l.groups[gk]
			if g == nil {
				g = l.newGroup(a)
				l.groups[gk] = g
			}
			g.members.Upsert(key, a)
			regroup = true
		}
	}
	return regroup
}

func (l *activityList) sortGroups() {
	l.groupOrder = l.groupOrder[:0]
	for _, g := range l.groups {
		l.groupOrder = append(l.groupOrder, g)
	}
	sort.Slice(l.groupOrder, func(i, j int) bool {
		a, b := l.groupOrder[i], l.groupOrder[j]
		if a.count() != b.count() {
			return a.count() > b.count()
		}
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		return a.key < b.key
	})
}

// state is everything the Watch stream told us, indexed for the views.
type state struct {
	acts      map[string]*durablev1.PendingActivity
	wfs       map[string]*durablev1.WorkflowInfo
	attempts  *activityList
	dead      *activityList
	workflows *sortedSet[*durablev1.WorkflowInfo]
	wfFilter  filter
	deadTotal int // dead letters whatever the filter, for the header
	// now is the console's clock, for filters that depend on the time
	// (nopoller).
	now time.Time
	// overrides are the policy overrides in force, for the detail view to
	// say who set a field and why; few, so a slice.
	overrides []*durablev1.PolicyOverride
	// queues is the daemon's last list of task queues, and wfTasks the
	// home view's rows for workflow tasks stalled on them (queues.go).
	queues  queues
	wfTasks stalledWorkflowTasks
}

// putOverrides applies overrides set or (Cleared) cleared.
func (s *state) putOverrides(changes []*durablev1.PolicyOverride) {
	for _, o := range changes {
		s.overrides = slices.DeleteFunc(s.overrides, func(old *durablev1.PolicyOverride) bool {
			return old.GetActivityType() == o.GetActivityType() && old.GetTaskQueue() == o.GetTaskQueue()
		})
		if !o.GetCleared() {
			s.overrides = append(s.overrides, o)
		}
	}
}

// countDead keeps deadTotal as activities change state.
func (s *state) countDead(old, a *durablev1.PendingActivity) {
	if old != nil && isDead(old) {
		s.deadTotal--
	}
	if a != nil && isDead(a) {
		s.deadTotal++
	}
}

func newState() *state {
	s := &state{
		acts:      make(map[string]*durablev1.PendingActivity),
		wfs:       make(map[string]*durablev1.WorkflowInfo),
		workflows: newSortedSet(workflowLess),
		wfTasks:   newStalledWorkflowTasks(),
	}
	s.attempts = newActivityList(false, filter{}, &s.queues)
	s.dead = newActivityList(true, filter{}, &s.queues)
	return s
}

// upsertActivities stores changed activities; each costs O(log n) plus a
// slice move per list.
func (s *state) upsertActivities(acts []*durablev1.PendingActivity) {
	regroup := false
	for _, a := range acts {
		k := keyOf(a)
		old := s.acts[k]
		s.acts[k] = a
		s.countDead(old, a)
		s.attempts.put(k, old, a, s.now)
		if s.dead.put(k, old, a, s.now) {
			regroup = true
		}
	}
	if regroup {
		s.dead.sortGroups()
	}
}

func (s *state) removeActivities(refs []*durablev1.ActivityRef) {
	regroup := false
	for _, r := range refs {
		k := activityKey(r.GetWorkflowId(), r.GetActivityId())
		old, ok := s.acts[k]
		if !ok {
			continue
		}
		delete(s.acts, k)
		s.countDead(old, nil)
		s.attempts.put(k, old, nil, s.now)
		if s.dead.put(k, old, nil, s.now) {
			regroup = true
		}
	}
	if regroup {
		s.dead.sortGroups()
	}
}

// advance moves the home view's clock to now: rows that became overdue
// since move up, each at the cost of an upsert.
func (s *state) advance(now time.Time) {
	l := s.attempts
	promoted := l.home.due(now)
	s.advanceWorkflowTasks(l.home.now)
	for _, p := range promoted {
		if cur, ok := l.set.Get(p.key); ok && cur == p.a && l.home.rank[cur] != urgencyOverdue {
			l.set.Remove(p.key)
			l.home.rank[cur] = urgencyOverdue
			l.set.Upsert(p.key, cur)
		}
	}
	if l.home.stale(l.set.Len()) {
		l.home.compact(l.set)
	}
}

// sortHomeBy orders the home view by k.
func (s *state) sortHomeBy(k sortKey) {
	s.attempts.home.key = k
	s.refilterActivities(false, s.attempts.filter)
}

// hideDeadFromHome leaves dead letters to their own screen (or brings them
// back to the home view).
func (s *state) hideDeadFromHome(hide bool) {
	s.attempts.home.hideDead = hide
	s.refilterActivities(false, s.attempts.filter)
}

func (s *state) upsertWorkflows(wfs []*durablev1.WorkflowInfo) {
	for _, w := range wfs {
		s.wfs[w.GetWorkflowId()] = w
		if s.wfFilter.matchWorkflow(w) {
			s.workflows.Upsert(w.GetWorkflowId(), w)
		} else {
			s.workflows.Remove(w.GetWorkflowId())
		}
		s.trackWorkflowTask(w)
	}
}

// load fills the list from every activity in one sort per set: the one O(n)
// step, taken for a snapshot or when the user changes the filter.
func (l *activityList) load(acts map[string]*durablev1.PendingActivity, now time.Time) {
	var ids []string
	var items []*durablev1.PendingActivity
	byGroup := map[string][]string{}
	groupItems := map[string][]*durablev1.PendingActivity{}
	for k, a := range acts {
		if !l.wants(a, now) {
			continue
		}
		ids = append(ids, k)
		items = append(items, a)
		if l.groups != nil {
			gk := l.groupKey(a)
			byGroup[gk] = append(byGroup[gk], k)
			groupItems[gk] = append(groupItems[gk], a)
		}
	}
	if l.home.rank != nil {
		l.home.reset()
		for i, a := range items {
			l.home.place(ids[i], a)
		}
	}
	l.set.load(ids, items)
	if l.groups != nil {
		l.groups = make(map[string]*failureGroup, len(byGroup))
		for gk, gids := range byGroup {
			g := l.newGroup(groupItems[gk][0])
			g.members.load(gids, groupItems[gk])
			l.groups[gk] = g
		}
		l.sortGroups()
	}
}

// refilterActivities rebuilds a list for a new filter, keeping the home
// view's order and clock.
func (s *state) refilterActivities(dead bool, f filter) {
	l := newActivityList(dead, f, &s.queues)
	if !dead && s.attempts != nil {
		l.home.key, l.home.hideDead, l.home.now = s.attempts.home.key, s.attempts.home.hideDead, s.attempts.home.now
	}
	if dead && s.dead != nil {
		l.byPrint = s.dead.byPrint
	}
	l.load(s.acts, s.now)
	if dead {
		s.dead = l
		return
	}
	for id, row := range s.wfTasks.rows {
		l.put(activityKey(id, ""), nil, row, s.now)
	}
	s.attempts = l
}

func (s *state) refilterWorkflows(f filter) {
	s.wfFilter = f
	var ids []string
	var items []*durablev1.WorkflowInfo
	for id, w := range s.wfs {
		if f.matchWorkflow(w) {
			ids = append(ids, id)
			items = append(items, w)
		}
	}
	s.workflows = newSortedSet(workflowLess)
	s.workflows.load(ids, items)
}

// replaceWith loads a complete snapshot, keeping the filters: the state after
// a (re)connection is exactly what the daemon sent.
func (s *state) replaceWith(acts []*durablev1.PendingActivity, wfs []*durablev1.WorkflowInfo) {
	s.acts = make(map[string]*durablev1.PendingActivity, len(acts))
	s.deadTotal = 0
	for _, a := range acts {
		s.countDead(s.acts[keyOf(a)], a)
		s.acts[keyOf(a)] = a
	}
	s.wfs = make(map[string]*durablev1.WorkflowInfo, len(wfs))
	for _, w := range wfs {
		s.wfs[w.GetWorkflowId()] = w
	}
	s.refilterActivities(false, s.attempts.filter)
	s.refilterActivities(true, s.dead.filter)
	s.refilterWorkflows(s.wfFilter)
	s.reloadWorkflowTasks()
}

// groupDeadBy groups the dead letters by fingerprint (or by failure type):
// one O(n) rebuild, when the user asks.
func (s *state) groupDeadBy(fingerprint bool) {
	s.dead.byPrint = fingerprint
	s.refilterActivities(true, s.dead.filter)
}

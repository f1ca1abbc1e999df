package tui

import (
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

// failureGroup is every shown dead letter with one failure type: one outage is
// one line.
type failureGroup struct {
	typ     string
	members *sortedSet[*durablev1.PendingActivity] // deadLess: first is newest
}

func (g *failureGroup) count() int { return g.members.Len() }

func (g *failureGroup) lastSeen() time.Time {
	return g.members.At(0).GetDeadLetteredTime().AsTime()
}

func (g *failureGroup) firstSeen() time.Time {
	return g.members.At(g.members.Len() - 1).GetDeadLetteredTime().AsTime()
}

func groupKey(a *durablev1.PendingActivity) string {
	if t := a.GetLastFailure().GetType(); t != "" {
		return t
	}
	return noFailureType
}

// activityList is one view's filtered, ordered activities.
type activityList struct {
	filter   filter
	onlyDead bool
	set      *sortedSet[*durablev1.PendingActivity]
	// Dead letters only: groups by failure type, largest first.
	groups     map[string]*failureGroup
	groupOrder []*failureGroup
}

func newActivityList(onlyDead bool, f filter) *activityList {
	less := attemptsLess
	if onlyDead {
		less = deadLess
	}
	l := &activityList{filter: f, onlyDead: onlyDead, set: newSortedSet(less)}
	if onlyDead {
		l.groups = make(map[string]*failureGroup)
	}
	return l
}

func (l *activityList) wants(a *durablev1.PendingActivity, now time.Time) bool {
	if l.onlyDead && a.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		return false
	}
	return l.filter.matchActivity(a, now)
}

// put applies the new version of an activity (nil: it is gone) and reports
// whether the group order needs sorting.
func (l *activityList) put(key string, old, a *durablev1.PendingActivity, now time.Time) bool {
	regroup := false
	if old != nil {
		if _, ok := l.set.Remove(key); ok && l.groups != nil {
			gk := groupKey(old)
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
		l.set.Upsert(key, a)
		if l.groups != nil {
			gk := groupKey(a)
			g := l.groups[gk]
			if g == nil {
				g = &failureGroup{typ: gk, members: newSortedSet(deadLess)}
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
		return a.typ < b.typ
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
	return &state{
		acts:      make(map[string]*durablev1.PendingActivity),
		wfs:       make(map[string]*durablev1.WorkflowInfo),
		attempts:  newActivityList(false, filter{}),
		dead:      newActivityList(true, filter{}),
		workflows: newSortedSet(workflowLess),
	}
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

func (s *state) upsertWorkflows(wfs []*durablev1.WorkflowInfo) {
	for _, w := range wfs {
		s.wfs[w.GetWorkflowId()] = w
		if s.wfFilter.matchWorkflow(w) {
			s.workflows.Upsert(w.GetWorkflowId(), w)
		} else {
			s.workflows.Remove(w.GetWorkflowId())
		}
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
			gk := groupKey(a)
			byGroup[gk] = append(byGroup[gk], k)
			groupItems[gk] = append(groupItems[gk], a)
		}
	}
	l.set.load(ids, items)
	if l.groups != nil {
		l.groups = make(map[string]*failureGroup, len(byGroup))
		for gk, gids := range byGroup {
			g := &failureGroup{typ: gk, members: newSortedSet(deadLess)}
			g.members.load(gids, groupItems[gk])
			l.groups[gk] = g
		}
		l.sortGroups()
	}
}

// refilterActivities rebuilds a list for a new filter.
func (s *state) refilterActivities(dead bool, f filter) {
	l := newActivityList(dead, f)
	l.load(s.acts, s.now)
	if dead {
		s.dead = l
		return
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
}

package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A workflow task that schedules many activities asks, for each, whether
// its id was used before (UseActivityID) and reads the activity to count
// it: a round trip each. When a transaction asks of one workflow a second
// time, it reads the workflow's used ids and the ids of its activities at
// once (up to maxKnownIDs of each), and answers the rest from memory, the
// inserts of the new ids waiting with the transaction's other writes. Under
// repeatable read the lists stay true for the whole transaction, but for
// its own writes: the ids it marks used are added here, and the activities
// it writes are in its cache, which is asked first.

// maxKnownIDs bounds the ids of one workflow a transaction reads at once;
// a workflow with more is asked one id at a time.
const maxKnownIDs = 1000

// workflowIDs is what a transaction knows of one workflow's activity ids.
type workflowIDs struct {
	asked   int  // times UseActivityID asked before the lists were read
	loaded  bool // used and exist hold the lists
	tooMany bool // the workflow has more than maxKnownIDs: ask one at a time
	used    map[string]bool
	exist   map[string]bool // the activities the workflow had when read
}

// knownIDs returns what the transaction knows of workflowID's activity
// ids, reading the lists when it asks a second time.
func (t *tx) knownIDs(workflowID string) (*workflowIDs, error) {
	if t.ids == nil {
		t.ids = map[string]*workflowIDs{}
	}
	w := t.ids[workflowID]
	if w == nil {
		w = &workflowIDs{}
		t.ids[workflowID] = w
	}
	if w.loaded || w.tooMany {
		return w, nil
	}
	if w.asked++; w.asked < 2 {
		return w, nil
	}
	used, exist := map[string]bool{}, map[string]bool{}
	rows, err := t.q.Query(t.ctx, `(SELECT true, activity_id FROM activity_ids WHERE workflow_id = $1 LIMIT $2)
		UNION ALL (SELECT false, activity_id FROM activities WHERE workflow_id = $1 LIMIT $2)`, b(workflowID), maxKnownIDs+1)
	if err != nil {
		return nil, fmt.Errorf("activity ids of workflow %q: %w", workflowID, err)
	}
	var isUsed bool
	var id []byte
	_, err = pgx.ForEachRow(rows, []any{&isUsed, &id}, func() error {
		if isUsed {
			used[string(id)] = true
		} else {
			exist[string(id)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("activity ids of workflow %q: %w", workflowID, err)
	}
	if len(used) > maxKnownIDs || len(exist) > maxKnownIDs {
		w.tooMany = true
		return w, nil
	}
	w.loaded, w.used, w.exist = true, used, exist
	return w, nil
}

// useKnownID is UseActivityID from the lists w holds.
func (t *tx) useKnownID(w *workflowIDs, workflowID, activityID string) (bool, error) {
	if _, known := t.cache[recordKey{table: cacheActivity, wf: workflowID, id: activityID}]; !known && !w.exist[activityID] {
		t.keep(recordKey{table: cacheActivity, wf: workflowID, id: activityID}, cachedRecord{})
	}
	if w.used[activityID] {
		return true, nil
	}
	w.used[activityID] = true
	return false, t.writeOne(fmt.Sprintf("activity id %s/%s", workflowID, activityID), activityIDsTable, b(workflowID), b(activityID))
}

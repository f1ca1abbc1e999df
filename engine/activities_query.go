package engine

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// maxScanned bounds the records one page of a filtered list reads. A filter
// that matches little would otherwise read a whole index in one call; with
// the bound, such a page ends early, with fewer entries than asked for (even
// none) and a token to go on from.
const maxScanned = 10000

// ListActivities pages through pending activities across workflows: those of
// one state (or every state) and, with activity_type, of one type, read from
// the store's state index, so that the cost is that of the activities read,
// not of the workflows. The other filters (attempt, failure type and
// fingerprint, task queue) are checked on the records read. Activities come
// grouped by state, then by type, then in workflow and activity id order;
// the page token is the store's cursor, and one that is not (or that belongs
// to a query for another state or type) is refused.
func (e *Engine) ListActivities(ctx context.Context, req *durablev1.ListActivitiesRequest) (*durablev1.ListActivitiesResponse, error) {
	size := pageSize(req.GetPageSize())
	r := StateRange{State: req.GetState(), ActivityType: req.GetActivityType()}
	resp := &durablev1.ListActivitiesResponse{}
	err := e.view(func(tx Tx) error {
		scanned, full := 0, false
		last, err := tx.ActivitiesByState(r, req.GetNextPageToken(), func(a *durablev1.ActivityRecord) bool {
			scanned++
			if in := a.GetInfo(); matchesActivity(in, req) {
				e.showInForce(in)
				resp.Activities = append(resp.Activities, in)
			}
			full = len(resp.Activities) == size || scanned == maxScanned
			return !full
		})
		if err != nil {
			return err
		}
		if full {
			resp.NextPageToken = last
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// matchesActivity reports whether an activity passes every filter of q that
// is set.
func matchesActivity(in *durablev1.PendingActivity, q *durablev1.ListActivitiesRequest) bool {
	switch {
	case q.GetState() != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED && in.GetState() != q.GetState():
		return false
	case q.GetActivityType() != "" && in.GetActivityType() != q.GetActivityType():
		return false
	case in.GetAttempt() < q.GetMinAttempt():
		return false
	case q.GetFailureType() != "" && in.GetLastFailure().GetType() != q.GetFailureType():
		return false
	case q.GetFailureFingerprint() != "" && fingerprintOf(in) != q.GetFailureFingerprint():
		return false
	case q.GetTaskQueue() != "" && in.GetTaskQueue() != q.GetTaskQueue():
		return false
	}
	return true
}

// deadLetteredRange is the span of dead-lettered times a filter selects.
func deadLetteredRange(f *durablev1.DeadLetterFilter) TimeRange {
	var r TimeRange
	if t := f.GetDeadLetteredAfter(); t != nil {
		r.From = t.AsTime()
	}
	if t := f.GetDeadLetteredBefore(); t != nil {
		r.Before = t.AsTime()
	}
	return r
}

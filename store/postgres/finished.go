package postgres

import (
	"fmt"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func (t *tx) PutFinishedActivity(f *durablev1.FinishedActivity) error {
	in := f.GetActivity()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("activity_id", id)); err != nil {
		return err
	}
	v, err := marshal(f)
	if err != nil {
		return err
	}
	return t.writeOne(fmt.Sprintf("put finished activity %s/%s", wf, id), finishedTable,
		b(wf), b(id), nanos(f.GetFinishedTime().AsTime()), v)
}

func (t *tx) FinishedActivities(workflowID string) ([]*durablev1.FinishedActivity, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	return records(t, func() *durablev1.FinishedActivity { return new(durablev1.FinishedActivity) },
		fmt.Sprintf("finished activities of workflow %q", workflowID),
		"SELECT record FROM finished_activities WHERE workflow_id = $1 ORDER BY activity_id", b(workflowID))
}

func (t *tx) DeleteFinishedBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	// By place, as DeleteAuditBefore.
	tag, err := t.q.Exec(t.ctx, `DELETE FROM finished_activities WHERE ctid = ANY (ARRAY (
		SELECT ctid FROM finished_activities WHERE finished_at < $1
		ORDER BY finished_at, length(workflow_id), workflow_id, activity_id LIMIT $2))`, nanos(before), limit)
	if err != nil {
		return 0, fmt.Errorf("finished activities: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

package badger

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Finished activities: the record under its workflow and activity ids
// (0x70), and a key under its finished time (0x71) that retention deletes
// from the front. Both change in the same transaction.

func (t *tx) PutFinishedActivity(f *durablev1.FinishedActivity) error {
	in := f.GetActivity()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("activity_id", id)); err != nil {
		return err
	}
	key := finishedKey(wf, id)
	var oldIdx [][]byte
	old := new(durablev1.FinishedActivity)
	switch err := t.get(key, old); {
	case err == nil:
		oldIdx = [][]byte{finishedTimeKey(old.GetFinishedTime().AsTime(), wf, id)}
	case !errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("finished activity %s/%s: %w", wf, id, err)
	}
	if err := t.put(key, f); err != nil {
		return fmt.Errorf("put finished activity %s/%s: %w", wf, id, err)
	}
	return t.replaceIndex(oldIdx, [][]byte{finishedTimeKey(f.GetFinishedTime().AsTime(), wf, id)})
}

func (t *tx) FinishedActivities(workflowID string) ([]*durablev1.FinishedActivity, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	var out []*durablev1.FinishedActivity
	err := t.each(finishedPrefix(workflowID), func(k, v []byte) (bool, error) {
		f := new(durablev1.FinishedActivity)
		out = append(out, f)
		return true, unmarshal(k, v, f)
	})
	if err != nil {
		return nil, fmt.Errorf("finished activities of workflow %q: %w", workflowID, err)
	}
	return out, nil
}

func (t *tx) DeleteFinishedBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	prefix := []byte{prefixFinishedTime}
	end := appendTime(bytes.Clone(prefix), before)
	var keys [][]byte
	err := t.eachKey(prefix, nil, func(k []byte) (bool, error) {
		if bytes.Compare(k, end) >= 0 {
			return false, nil
		}
		keys = append(keys, bytes.Clone(k))
		return len(keys) < limit, nil
	})
	if err != nil {
		return 0, fmt.Errorf("finished activities: %w", err)
	}
	for _, k := range keys {
		ref, err := decodeFinishedTimeKey(k)
		if err != nil {
			return 0, err
		}
		if err := t.txn.Delete(finishedKey(ref.workflowID, ref.activityID)); err != nil {
			return 0, fmt.Errorf("delete finished activity %s/%s: %w", ref.workflowID, ref.activityID, err)
		}
		if err := t.txn.Delete(k); err != nil {
			return 0, fmt.Errorf("delete finished time entry: %w", err)
		}
	}
	return len(keys), nil
}

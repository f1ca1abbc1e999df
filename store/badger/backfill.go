package badger

import (
	"bytes"
	"errors"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// backfillBatch bounds the index entries one backfill transaction writes.
const backfillBatch = 1000

// A data directory written before an index existed holds records without
// its entries: the reads that use the index would never see them, and a
// later write that keeps what the entry is derived from would not add it.
// Open therefore backfills each index added since the first release, once
// per start, before anything else uses the store: when nothing is missing
// it costs a read of the table, as the engine's own start does.

// backfillStateIndex gives every activity record its state index entry
// (0x13).
func (s *Store) backfillStateIndex() error {
	return s.backfill("the activity state index", prefixActivity, func(k, v []byte) ([][]byte, error) {
		a := new(durablev1.ActivityRecord)
		if err := unmarshal(k, v, a); err != nil {
			return nil, err
		}
		in := a.GetInfo()
		if in.GetState() == durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
			return nil, nil
		}
		return [][]byte{activityStateKey(in.GetState(), in.GetActivityType(), in.GetWorkflowId(), in.GetActivityId())}, nil
	})
}

// backfillWorkflowIndexes gives every workflow record its entry in the
// running (0x15) or closed (0x14) index.
func (s *Store) backfillWorkflowIndexes() error {
	return s.backfill("the running and closed workflow indexes", prefixWorkflow, func(k, v []byte) ([][]byte, error) {
		w := new(durablev1.WorkflowRecord)
		if err := unmarshal(k, v, w); err != nil {
			return nil, err
		}
		switch in := w.GetInfo(); in.GetStatus() {
		case durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED:
			return nil, nil
		case durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING:
			return [][]byte{workflowRunningKey(in.GetWorkflowId())}, nil
		default:
			return [][]byte{workflowClosedKey(in.GetCloseTime().AsTime(), in.GetWorkflowId())}, nil
		}
	})
}

// backfill reads every record under prefix and writes the index keys that
// keysOf derives from it and that are missing, at most backfillBatch per
// transaction.
func (s *Store) backfill(what string, prefix byte, keysOf func(k, v []byte) ([][]byte, error)) error {
	var after []byte
	for {
		var missing [][]byte
		var next []byte
		err := s.db.View(func(txn *badgerdb.Txn) error {
			it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefix}, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			seek := []byte{prefix}
			if after != nil {
				seek = after
			}
			for it.Seek(seek); it.Valid(); it.Next() {
				item := it.Item()
				if after != nil && bytes.Equal(item.Key(), after) {
					continue
				}
				var keys [][]byte
				err := item.Value(func(v []byte) error {
					var err error
					keys, err = keysOf(item.Key(), v)
					return err
				})
				if err != nil {
					return err
				}
				for _, k := range keys {
					switch _, err := txn.Get(k); {
					case errors.Is(err, badgerdb.ErrKeyNotFound):
						missing = append(missing, k)
					case err != nil:
						return err
					}
				}
				if len(missing) >= backfillBatch {
					next = item.KeyCopy(nil)
					return nil
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("backfill %s: %w", what, err)
		}
		if len(missing) > 0 {
			err := s.db.Update(func(txn *badgerdb.Txn) error {
				for _, k := range missing {
					if err := txn.Set(k, nil); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("backfill %s: %w", what, err)
			}
		}
		if next == nil {
			return nil
		}
		after = next
	}
}

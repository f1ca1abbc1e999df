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

// backfillStateIndex gives every activity record its state index entry
// (0x13). A data directory written before that index existed holds
// activities without one, which ListActivities would never show, and which
// a later write that keeps their state would not add. Open runs it once per
// start, before anything else uses the store: when nothing is missing it
// costs a read of the activity table, as the engine's own start does.
func (s *Store) backfillStateIndex() error {
	var after []byte
	for {
		var missing [][]byte
		var next []byte
		err := s.db.View(func(txn *badgerdb.Txn) error {
			it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixActivity}, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			seek := []byte{prefixActivity}
			if after != nil {
				seek = after
			}
			for it.Seek(seek); it.Valid(); it.Next() {
				item := it.Item()
				if after != nil && bytes.Equal(item.Key(), after) {
					continue
				}
				a := new(durablev1.ActivityRecord)
				if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, a) }); err != nil {
					return err
				}
				in := a.GetInfo()
				if in.GetState() == durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
					continue
				}
				k := activityStateKey(in.GetState(), in.GetActivityType(), in.GetWorkflowId(), in.GetActivityId())
				switch _, err := txn.Get(k); {
				case errors.Is(err, badgerdb.ErrKeyNotFound):
					missing = append(missing, k)
				case err != nil:
					return err
				}
				if len(missing) == backfillBatch {
					next = item.KeyCopy(nil)
					return nil
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("backfill the activity state index: %w", err)
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
				return fmt.Errorf("backfill the activity state index: %w", err)
			}
		}
		if next == nil {
			return nil
		}
		after = next
	}
}

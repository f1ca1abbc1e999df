package badger

import (
	"bytes"
	"encoding/binary"
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
// Open therefore backfills each index added since the first release before
// anything else uses the store, and then writes indexVersion under
// keyIndexVersion: a directory that says it holds them whole is not read
// again, so a start costs what the engine reads, not a read of every record.

// indexVersion is the indexes a data directory holds whole once Open wrote
// it: 1 is the state index, the running and closed workflow indexes and
// the activity counts.
const indexVersion = 1

// backfillIndexes brings a data directory written by an older release up to
// indexVersion.
func (s *Store) backfillIndexes() error {
	var v uint64
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		v, err = (&tx{txn: txn}).indexVersion()
		return err
	})
	if err != nil || v >= indexVersion {
		return err
	}
	for _, backfill := range []func() error{s.backfillStateIndex, s.backfillWorkflowIndexes, s.backfillActivityCounts} {
		if err := backfill(); err != nil {
			return err
		}
	}
	return s.db.Update(func(txn *badgerdb.Txn) error {
		return txn.Set(indexVersionKey(), binary.BigEndian.AppendUint64(nil, indexVersion))
	})
}

// backfillActivityCounts counts every activity record by queue and state
// and writes the counts (0x31), replacing any there.
func (s *Store) backfillActivityCounts() error {
	counts := map[string]int64{}
	var stale [][]byte
	err := s.db.View(func(txn *badgerdb.Txn) error {
		t := &tx{txn: txn}
		err := t.ScanActivities(func(a *durablev1.ActivityRecord) bool {
			if k := countKeyOf(a); k != nil {
				counts[string(k)]++
			}
			return true
		})
		if err != nil {
			return err
		}
		return t.eachKey([]byte{prefixActivityCount}, nil, func(k []byte) (bool, error) {
			stale = append(stale, bytes.Clone(k))
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("backfill the activity counts: %w", err)
	}
	err = s.db.Update(func(txn *badgerdb.Txn) error {
		for _, k := range stale {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for k, n := range counts {
			if err := txn.Set([]byte(k), encodeCounter(n)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("backfill the activity counts: %w", err)
	}
	return nil
}

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

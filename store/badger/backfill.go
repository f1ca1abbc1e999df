package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
// the activity counts; 2 adds the activity-id markers of running workflows.
const indexVersion = 2

// countsVersion is the first indexVersion that holds the activity counts.
const countsVersion = 1

// backfillIndexes brings a data directory written by an older release up to
// indexVersion.
func (s *Store) backfillIndexes(log *slog.Logger) error {
	var v uint64
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		v, err = (&tx{txn: txn}).indexVersion()
		return err
	})
	if err != nil || v >= indexVersion {
		return err
	}
	var backfills []func() error
	if v < 1 {
		backfills = append(backfills, s.backfillStateIndex, s.backfillWorkflowIndexes, s.backfillActivityCounts)
	}
	// After the running index, which it reads.
	backfills = append(backfills, func() error {
		began := time.Now()
		workflows, marked, err := s.backfillActivityIDs()
		if err == nil && marked > 0 {
			log.Info("marked the activity ids running workflows had scheduled, once (a data directory from before the markers)",
				"workflows", workflows, "ids", marked, "took", time.Since(began).Round(time.Millisecond))
		}
		return err
	})
	for _, backfill := range backfills {
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

// backfillActivityIDs marks every activity id a running workflow's history
// scheduled (0x05). Markers came after the first data directories, which
// told a used id by reading the history instead: without them such a
// directory would let a workflow schedule an id a second time. A closed
// workflow schedules nothing, so only the running ones are read.
// It returns how many running workflows it read and how many ids it marked.
func (s *Store) backfillActivityIDs() (workflows, marked int, err error) {
	var running []string
	err = s.db.View(func(txn *badgerdb.Txn) error {
		return (&tx{txn: txn}).eachKey([]byte{prefixWorkflowRunning}, nil, func(k []byte) (bool, error) {
			id, err := decodeWorkflowRunningKey(k)
			running = append(running, id)
			return err == nil, err
		})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("backfill the activity-id markers: %w", err)
	}
	var missing [][]byte
	write := func() error {
		marked += len(missing)
		err := s.setEntries(missing)
		missing = missing[:0]
		return err
	}
	for _, wf := range running {
		err := s.db.View(func(txn *badgerdb.Txn) error {
			return (&tx{txn: txn}).each(historyPrefix(wf), func(k, v []byte) (bool, error) {
				ev := new(durablev1.HistoryEvent)
				if err := unmarshal(k, v, ev); err != nil {
					return false, err
				}
				if ev.GetType() != durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
					return true, nil
				}
				key := activityIDKey(wf, ev.GetActivityId())
				switch _, err := txn.Get(key); {
				case errors.Is(err, badgerdb.ErrKeyNotFound):
					missing = append(missing, key)
				case err != nil:
					return false, err
				}
				return true, nil
			})
		})
		if err == nil && len(missing) >= backfillBatch {
			err = write()
		}
		if err != nil {
			return 0, 0, fmt.Errorf("backfill the activity-id markers of %s: %w", wf, err)
		}
	}
	if len(missing) > 0 {
		if err := write(); err != nil {
			return 0, 0, fmt.Errorf("backfill the activity-id markers: %w", err)
		}
	}
	return len(running), marked, nil
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
			if err := s.setEntries(missing); err != nil {
				return fmt.Errorf("backfill %s: %w", what, err)
			}
		}
		if next == nil {
			return nil
		}
		after = next
	}
}

// setEntries writes index entries (keys without a value) in one
// transaction.
func (s *Store) setEntries(keys [][]byte) error {
	return s.db.Update(func(txn *badgerdb.Txn) error {
		for _, k := range keys {
			if err := txn.Set(k, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

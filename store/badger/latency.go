package badger

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Hourly latency records (prefix 0x21). The hour is in the key; the record
// carries it too, so a reader needs no key to know it.

func (t *tx) GetLatencyHour(activityType string, hour time.Time) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	l := new(durablev1.LatencyRecord)
	if err := t.get(latencyHourKey(activityType, hour), l); err != nil {
		return nil, fmt.Errorf("latency of %q in the hour of %s: %w", activityType, hour.UTC().Format(time.RFC3339), err)
	}
	return l, nil
}

func (t *tx) PutLatencyHour(l *durablev1.LatencyRecord) error {
	if err := checkPart("activity_type", l.GetActivityType()); err != nil {
		return err
	}
	if l.GetHour() == nil {
		return &engine.InvalidError{Field: "hour", Reason: "an hourly latency record needs its hour"}
	}
	hour := l.GetHour().AsTime()
	if err := t.put(latencyHourKey(l.GetActivityType(), hour), l); err != nil {
		return fmt.Errorf("put latency of %q in the hour of %s: %w", l.GetActivityType(), hour.UTC().Format(time.RFC3339), err)
	}
	return nil
}

func (t *tx) LatencyHours(since time.Time, fn func(*durablev1.LatencyRecord) bool) error {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixLatencyHour}, PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.Valid(); {
		item := it.Item()
		ref, err := decodeLatencyHourKey(item.Key())
		if err != nil {
			return err
		}
		if ref.hour.Before(since) {
			// Skip the type's older hours in one seek.
			it.Seek(latencyHourKey(ref.activityType, since))
			continue
		}
		l := new(durablev1.LatencyRecord)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, l) }); err != nil {
			return err
		}
		if !fn(l) {
			return nil
		}
		it.Next()
	}
	return nil
}

func (t *tx) LatencyHoursBefore(before time.Time, limit int) ([]*durablev1.LatencyRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixLatencyHour}, PrefetchValues: false})
	defer it.Close()
	end := appendTime(nil, before)
	var out []*durablev1.LatencyRecord
	for it.Rewind(); it.Valid() && len(out) < limit; {
		item := it.Item()
		ref, err := decodeLatencyHourKey(item.Key())
		if err != nil {
			return nil, err
		}
		k := item.Key()
		if bytes.Compare(k[len(k)-8:], end) >= 0 {
			// The type's remaining hours are all at or after the cutoff.
			it.Seek(latencyTypeEnd(ref.activityType))
			continue
		}
		l := new(durablev1.LatencyRecord)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, l) }); err != nil {
			return nil, err
		}
		out = append(out, l)
		it.Next()
	}
	return out, nil
}

func (t *tx) DeleteLatencyHour(activityType string, hour time.Time) error {
	if err := checkPart("activity_type", activityType); err != nil {
		return err
	}
	if err := t.txn.Delete(latencyHourKey(activityType, hour)); err != nil {
		return fmt.Errorf("delete latency of %q in the hour of %s: %w", activityType, hour.UTC().Format(time.RFC3339), err)
	}
	if t.recent != nil {
		t.recent.noteWrite(latencyHourKey(activityType, hour), nil)
	}
	return nil
}

// Policy overrides (prefix 0x60).

func (t *tx) GetPolicyOverride(activityType, taskQueue string) (*durablev1.PolicyOverride, error) {
	if err := firstErr(checkPart("activity_type", activityType), checkPart("task_queue", taskQueue)); err != nil {
		return nil, err
	}
	o := new(durablev1.PolicyOverride)
	if err := t.get(policyOverrideKey(activityType, taskQueue), o); err != nil {
		return nil, fmt.Errorf("policy override of %q on %s: %w", activityType, queueName(taskQueue), err)
	}
	return o, nil
}

func (t *tx) PutPolicyOverride(o *durablev1.PolicyOverride) error {
	typ, queue := o.GetActivityType(), o.GetTaskQueue()
	if err := firstErr(checkPart("activity_type", typ), checkPart("task_queue", queue)); err != nil {
		return err
	}
	if err := t.put(policyOverrideKey(typ, queue), o); err != nil {
		return fmt.Errorf("put policy override of %q on %s: %w", typ, queueName(queue), err)
	}
	return nil
}

func (t *tx) DeletePolicyOverride(activityType, taskQueue string) error {
	if err := firstErr(checkPart("activity_type", activityType), checkPart("task_queue", taskQueue)); err != nil {
		return err
	}
	err := t.txn.Delete(policyOverrideKey(activityType, taskQueue))
	if err != nil && !errors.Is(err, badgerdb.ErrKeyNotFound) {
		return fmt.Errorf("delete policy override of %q on %s: %w", activityType, queueName(taskQueue), err)
	}
	return nil
}

func (t *tx) PolicyOverrides() ([]*durablev1.PolicyOverride, error) {
	var out []*durablev1.PolicyOverride
	err := t.each([]byte{prefixPolicyOverride}, func(k, v []byte) (bool, error) {
		if _, _, err := decodePolicyOverrideKey(k); err != nil {
			return false, err
		}
		o := new(durablev1.PolicyOverride)
		out = append(out, o)
		return true, unmarshal(k, v, o)
	})
	if err != nil {
		return nil, fmt.Errorf("policy overrides: %w", err)
	}
	return out, nil
}

// queueName names a task queue in an error; "" is every queue.
func queueName(q string) string {
	if q == "" {
		return "every task queue"
	}
	return fmt.Sprintf("task queue %q", q)
}

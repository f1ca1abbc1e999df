package badger

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Tests of the cache of recent records (recent.go): whatever answers a read,
// a read-write transaction sees what the last commit left.

// attemptOf returns the attempt of activity w/id as a transaction of s sees it.
func attemptOf(t *testing.T, tx engine.Tx, id string) int32 {
	t.Helper()
	a, err := tx.GetActivity("w", id)
	if err != nil {
		t.Fatalf("GetActivity(%s): %v", id, err)
	}
	return a.GetInfo().GetAttempt()
}

func setAttempt(tx engine.Tx, id string, n int32) error {
	a, err := tx.GetActivity("w", id)
	if err != nil {
		return err
	}
	a.Info.Attempt = n
	return tx.PutActivity(a)
}

func TestRecent_AnUpdateReadsWhatTheUpdateBeforeItWroteAndNotWhatARolledBackOneDid(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustUpdate(t, s, func(tx engine.Tx) error { return setAttempt(tx, "1", 2) })
	if err := s.Update(func(tx engine.Tx) error {
		if err := setAttempt(tx, "1", 3); err != nil {
			return err
		}
		return errRollBack
	}); !errors.Is(err, errRollBack) {
		t.Fatalf("Update = %v, want the roll-back", err)
	}
	mustUpdate(t, s, func(tx engine.Tx) error {
		if got := attemptOf(t, tx, "1"); got != 2 {
			t.Errorf("attempt %d, want 2", got)
		}
		return tx.DeleteActivity("w", "1")
	})
	mustUpdate(t, s, func(tx engine.Tx) error {
		if _, err := tx.GetActivity("w", "1"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("GetActivity of a deleted activity = %v, want ErrNotFound", err)
		}
		return nil
	})
}

func TestRecent_AnUpdateThatReadFromTheCacheRunsAgainWhenAnotherCommitsMeanwhile(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustUpdate(t, s, func(tx engine.Tx) error { return setAttempt(tx, "1", 2) }) // cached now
	runs := 0
	mustUpdate(t, s, func(tx engine.Tx) error {
		runs++
		a, err := tx.GetActivity("w", "1")
		if err != nil {
			return err
		}
		if runs == 1 {
			// Another writer changes the record this one has read.
			mustUpdate(t, s, func(tx engine.Tx) error { return setAttempt(tx, "1", 10) })
		}
		a.Info.Attempt++
		return tx.PutActivity(a)
	})
	if runs != 2 {
		t.Errorf("the transaction ran %d times, want 2", runs)
	}
	mustUpdate(t, s, func(tx engine.Tx) error {
		if got := attemptOf(t, tx, "1"); got != 11 {
			t.Errorf("attempt %d, want 11: an update was lost", got)
		}
		return nil
	})
	checkIndexes(t, s)
}

func TestRecent_KeepsNoMoreThanItsBound(t *testing.T) {
	t.Parallel()
	r := newRecentRecords()
	v := make([]byte, 1000)
	for i := range 2 * recentBytes / len(v) {
		r.put(string(rune(i)), v)
		if r.bytes > recentBytes {
			t.Fatalf("after %d puts the cache holds %d bytes, more than %d", i+1, r.bytes, recentBytes)
		}
	}
	r.put("big", make([]byte, recentMaxValue+1))
	if _, ok := r.vals["big"]; ok {
		t.Error("a value above recentMaxValue was kept")
	}
}

func TestRecent_ALatencyHourDeletedIsGoneForTheNextUpdate(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	hour := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	mustUpdate(t, s, func(tx engine.Tx) error {
		return tx.PutLatencyHour(&durablev1.LatencyRecord{ActivityType: "Work", Hour: timestamppb.New(hour), Attempts: 3})
	})
	mustUpdate(t, s, func(tx engine.Tx) error {
		if l, err := tx.GetLatencyHour("Work", hour); err != nil || l.GetAttempts() != 3 {
			t.Errorf("GetLatencyHour = %v, %v; want 3 attempts", l, err)
		}
		return tx.DeleteLatencyHour("Work", hour)
	})
	mustUpdate(t, s, func(tx engine.Tx) error {
		if _, err := tx.GetLatencyHour("Work", hour); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("GetLatencyHour after its delete = %v, want ErrNotFound", err)
		}
		return nil
	})
}

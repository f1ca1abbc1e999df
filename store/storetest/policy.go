package storetest

import (
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// hourRecord is an hourly latency record of typ, h hours after T0.
func hourRecord(typ string, h int, attempts int64) *durablev1.LatencyRecord {
	return &durablev1.LatencyRecord{ActivityType: typ, Hour: at(time.Duration(h) * time.Hour), Attempts: attempts, Buckets: []int64{attempts}}
}

// hours renders hourly records as "type@h".
func hours(ls []*durablev1.LatencyRecord) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s@%d", l.GetActivityType(), int(l.GetHour().AsTime().Sub(T0)/time.Hour)))
	}
	return out
}

func testLatencyHoursWindow(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for _, l := range []*durablev1.LatencyRecord{
			hourRecord("Ship", 5, 1), hourRecord("Charge", 0, 1), hourRecord("Charge", 2, 2),
			hourRecord("Charge", 3, 3), hourRecord("Ship", 1, 1), hourRecord("Refund", 0, 9),
		} {
			if err := tx.PutLatencyHour(l); err != nil {
				return err
			}
		}
		return nil
	})
	// Writing an hour again replaces it.
	h.update(func(tx engine.Tx) error { return tx.PutLatencyHour(hourRecord("Charge", 2, 7)) })
	h.written()
	window := func(since time.Time) []*durablev1.LatencyRecord {
		var out []*durablev1.LatencyRecord
		h.view(func(tx engine.Tx) error {
			return tx.LatencyHours(since, func(l *durablev1.LatencyRecord) bool {
				out = append(out, l)
				return true
			})
		})
		return out
	}
	wantStrings(t, "every hour", hours(window(time.Time{})), []string{"Ship@1", "Ship@5", "Charge@0", "Charge@2", "Charge@3", "Refund@0"})
	got := window(T0.Add(2 * time.Hour))
	wantStrings(t, "hours from T0+2h", hours(got), []string{"Ship@5", "Charge@2", "Charge@3"})
	if len(got) > 1 && got[1].GetAttempts() != 7 {
		t.Errorf("rewritten hour has %d attempts, want 7", got[1].GetAttempts())
	}
	wantStrings(t, "hours from T0+6h", hours(window(T0.Add(6*time.Hour))), nil)
	h.view(func(tx engine.Tx) error {
		l, err := tx.GetLatencyHour("Charge", T0.Add(3*time.Hour))
		if err != nil {
			return err
		}
		wantEqual(t, "Charge at T0+3h", l, hourRecord("Charge", 3, 3))
		_, err = tx.GetLatencyHour("Charge", T0.Add(4*time.Hour))
		wantNotFound(t, "GetLatencyHour of an hour not written", err)
		return nil
	})
	var n int
	h.view(func(tx engine.Tx) error {
		return tx.LatencyHours(time.Time{}, func(*durablev1.LatencyRecord) bool { n++; return n < 2 })
	})
	if n != 2 {
		t.Errorf("LatencyHours went on after fn returned false: %d calls", n)
	}
	h.update(func(tx engine.Tx) error {
		if err := tx.PutLatencyHour(&durablev1.LatencyRecord{ActivityType: "NoHour"}); err == nil {
			t.Error("PutLatencyHour without an hour succeeded")
		}
		return nil
	})
}

func testLatencyHoursTrim(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for _, l := range []*durablev1.LatencyRecord{
			hourRecord("Charge", 0, 1), hourRecord("Charge", 1, 1), hourRecord("Charge", 9, 1),
			hourRecord("Ship", 2, 1), hourRecord("Ship", 8, 1), hourRecord("A", 0, 1),
		} {
			if err := tx.PutLatencyHour(l); err != nil {
				return err
			}
		}
		return nil
	})
	var old []*durablev1.LatencyRecord
	h.view(func(tx engine.Tx) (err error) {
		old, err = tx.LatencyHoursBefore(T0.Add(8*time.Hour), 100)
		return err
	})
	wantStrings(t, "hours before T0+8h", hours(old), []string{"A@0", "Ship@2", "Charge@0", "Charge@1"})
	h.view(func(tx engine.Tx) (err error) {
		old, err = tx.LatencyHoursBefore(T0.Add(8*time.Hour), 2)
		return err
	})
	wantStrings(t, "the first 2 hours before T0+8h", hours(old), []string{"A@0", "Ship@2"})
	h.update(func(tx engine.Tx) error {
		for _, l := range old {
			if err := tx.DeleteLatencyHour(l.GetActivityType(), l.GetHour().AsTime()); err != nil {
				return err
			}
		}
		return tx.DeleteLatencyHour("Nope", T0)
	})
	h.written()
	h.view(func(tx engine.Tx) (err error) {
		old, err = tx.LatencyHoursBefore(T0.Add(8*time.Hour), 100)
		return err
	})
	wantStrings(t, "hours before T0+8h after deleting two", hours(old), []string{"Charge@0", "Charge@1"})
}

func testPolicyOverrides(h *harness) {
	t := h.t
	six, two := int32(6), int32(2)
	anyQueue := &durablev1.PolicyOverride{ActivityType: "Charge", Patch: &durablev1.OptionsPatch{MaxAttempts: &six}, Reason: "INC-7", Principal: "ops", UpdatedTime: at(0), AuditId: 3}
	onQueue := &durablev1.PolicyOverride{ActivityType: "Charge", TaskQueue: "payments", Patch: &durablev1.OptionsPatch{MaxAttempts: &two}, Reason: "INC-8"}
	ship := &durablev1.PolicyOverride{ActivityType: "Ship", Patch: &durablev1.OptionsPatch{MaxAttempts: &two}}
	h.update(func(tx engine.Tx) error {
		for _, o := range []*durablev1.PolicyOverride{ship, onQueue, anyQueue} {
			if err := tx.PutPolicyOverride(o); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	list := func() []string {
		var out []string
		h.view(func(tx engine.Tx) error {
			os, err := tx.PolicyOverrides()
			for _, o := range os {
				out = append(out, o.GetActivityType()+"/"+o.GetTaskQueue())
			}
			return err
		})
		return out
	}
	wantStrings(t, "overrides", list(), []string{"Ship/", "Charge/", "Charge/payments"})
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetPolicyOverride("Charge", "")
		if err != nil {
			return err
		}
		wantEqual(t, "override of Charge on every queue", got, anyQueue)
		_, err = tx.GetPolicyOverride("Charge", "other")
		wantNotFound(t, "GetPolicyOverride of a queue without one", err)
		return nil
	})
	// Setting again replaces; clearing one leaves the others.
	seven := int32(7)
	again := &durablev1.PolicyOverride{ActivityType: "Charge", Patch: &durablev1.OptionsPatch{MaxAttempts: &seven}}
	h.update(func(tx engine.Tx) error {
		if err := tx.PutPolicyOverride(again); err != nil {
			return err
		}
		if err := tx.DeletePolicyOverride("Charge", "payments"); err != nil {
			return err
		}
		return tx.DeletePolicyOverride("Never", "set")
	})
	h.written()
	wantStrings(t, "overrides after a clear", list(), []string{"Ship/", "Charge/"})
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetPolicyOverride("Charge", "")
		if err == nil {
			wantEqual(t, "replaced override", got, again)
		}
		return err
	})
}

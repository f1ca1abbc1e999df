package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func auditRecord(id int64, d time.Duration) *durablev1.AuditRecord {
	return &durablev1.AuditRecord{Id: id, Time: at(d), Principal: "alice", Role: "operator", Rpc: "RedriveDeadLetter", Count: 1}
}

// auditIDs reads the audit log newest first, pages of size, from after.
func (h *harness) auditIDs(after []byte, size int) (ids []string, last []byte) {
	h.t.Helper()
	h.view(func(tx engine.Tx) error {
		var err error
		last, err = tx.AuditRecords(after, func(r *durablev1.AuditRecord) bool {
			ids = append(ids, fmt.Sprint(r.GetId()))
			return len(ids) < size
		})
		return err
	})
	return ids, last
}

func testAuditNewestFirstAndPaged(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		// Written out of order: the log orders by time, then id.
		for _, r := range []*durablev1.AuditRecord{auditRecord(3, time.Minute), auditRecord(1, 0), auditRecord(4, time.Hour), auditRecord(2, time.Minute)} {
			if err := tx.PutAudit(r); err != nil {
				return err
			}
		}
		return nil
	})
	// A record written again under its time and id replaces itself.
	again := auditRecord(2, time.Minute)
	again.Count, again.Done = 7, true
	h.update(func(tx engine.Tx) error { return tx.PutAudit(again) })
	h.written()

	all, _ := h.auditIDs(nil, 100)
	wantStrings(t, "whole log", all, []string{"4", "3", "2", "1"})
	page1, cursor := h.auditIDs(nil, 2)
	wantStrings(t, "first page", page1, []string{"4", "3"})
	page2, cursor := h.auditIDs(cursor, 2)
	wantStrings(t, "second page", page2, []string{"2", "1"})
	if page3, _ := h.auditIDs(cursor, 2); len(page3) != 0 {
		t.Errorf("page after the oldest = %v, want none", page3)
	}
	h.view(func(tx engine.Tx) error {
		_, err := tx.AuditRecords(nil, func(r *durablev1.AuditRecord) bool {
			if r.GetId() == 2 {
				wantEqual(t, "rewritten record", r, again)
			}
			return true
		})
		return err
	})
	// A cursor of another list, and bytes that are no cursor at all.
	h.update(func(tx engine.Tx) error {
		return tx.PutOperation(operationRecord(1, durablev1.OperationState_OPERATION_STATE_RUNNING))
	})
	_, operationCursor := h.operationIDs(nil, 1)
	for name, cursor := range map[string][]byte{"OperationCursor": operationCursor, "Garbage": []byte("not-a-cursor")} {
		h.view(func(tx engine.Tx) error {
			_, err := tx.AuditRecords(cursor, func(*durablev1.AuditRecord) bool { return true })
			if !errors.As(err, new(*engine.InvalidError)) {
				t.Errorf("AuditRecords with a foreign cursor (%s): err = %v, want *engine.InvalidError", name, err)
			}
			return nil
		})
	}
}

func testAuditDeleteBefore(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for i := range 5 {
			if err := tx.PutAudit(auditRecord(int64(i+1), time.Duration(i)*time.Hour)); err != nil {
				return err
			}
		}
		return nil
	})
	var n int
	h.update(func(tx engine.Tx) (err error) {
		n, err = tx.DeleteAuditBefore(T0.Add(3*time.Hour), 2)
		return err
	})
	if n != 2 {
		t.Errorf("DeleteAuditBefore with limit 2 deleted %d", n)
	}
	h.update(func(tx engine.Tx) (err error) {
		n, err = tx.DeleteAuditBefore(T0.Add(3*time.Hour), 100)
		return err
	})
	if n != 1 {
		t.Errorf("second DeleteAuditBefore deleted %d, want the 1 left before the cutoff", n)
	}
	h.written()
	ids, _ := h.auditIDs(nil, 100)
	wantStrings(t, "records at or after the cutoff", ids, []string{"5", "4"})
}

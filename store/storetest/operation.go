package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func operationRecord(seq int64, state durablev1.OperationState) *durablev1.OperationRecord {
	return &durablev1.OperationRecord{Seq: seq, Next: seq % 3, Operation: &durablev1.Operation{
		Id: fmt.Sprintf("op-%d", seq), Kind: "redrive", State: state, Principal: "alice", Matched: 5, Released: seq % 3,
		StartedTime: at(time.Duration(seq) * time.Minute),
	}}
}

// operationIDs reads the operations newest first, pages of size, from after.
func (h *harness) operationIDs(after []byte, size int) (ids []string, last []byte) {
	h.t.Helper()
	h.view(func(tx engine.Tx) error {
		var err error
		last, err = tx.Operations(after, func(r *durablev1.OperationRecord) bool {
			ids = append(ids, r.GetOperation().GetId())
			return len(ids) < size
		})
		return err
	})
	return ids, last
}

func testGetAudit(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error { return tx.PutAudit(auditRecord(5, time.Minute)) })
	h.written()
	h.view(func(tx engine.Tx) error {
		r, err := tx.GetAudit(T0.Add(time.Minute), 5)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "audit record", r, auditRecord(5, time.Minute))
		_, err = tx.GetAudit(T0, 5)
		wantNotFound(t, "audit record under another time", err)
		_, err = tx.GetAudit(T0.Add(time.Minute), 6)
		wantNotFound(t, "audit record of another id", err)
		return nil
	})
}

func testOperationsNewestFirstAndPaged(h *harness) {
	t := h.t
	running := durablev1.OperationState_OPERATION_STATE_RUNNING
	h.update(func(tx engine.Tx) error {
		// Written out of order, and one of them twice: the list orders by
		// seq, and a record written again replaces itself.
		for _, seq := range []int64{2, 300, 1, 256, 2} {
			if err := tx.PutOperation(operationRecord(seq, running)); err != nil {
				return err
			}
		}
		return nil
	})
	done := operationRecord(256, durablev1.OperationState_OPERATION_STATE_COMPLETED)
	done.ItemsDeleted = true
	h.update(func(tx engine.Tx) error { return tx.PutOperation(done) })
	h.update(func(tx engine.Tx) error { return tx.DeleteOperation(1) })
	h.written()

	all, _ := h.operationIDs(nil, 100)
	wantStrings(t, "every operation", all, []string{"op-300", "op-256", "op-2"})
	page1, cursor := h.operationIDs(nil, 2)
	wantStrings(t, "first page", page1, []string{"op-300", "op-256"})
	page2, cursor := h.operationIDs(cursor, 2)
	wantStrings(t, "second page", page2, []string{"op-2"})
	if page3, _ := h.operationIDs(cursor, 2); len(page3) != 0 {
		t.Errorf("page after the oldest = %v, want none", page3)
	}
	h.view(func(tx engine.Tx) error {
		r, err := tx.GetOperation(256)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "rewritten operation", r, done)
		_, err = tx.GetOperation(1)
		wantNotFound(t, "deleted operation", err)
		return nil
	})
	// A cursor of another list, and bytes that are no cursor at all.
	h.update(func(tx engine.Tx) error { return tx.PutAudit(auditRecord(1, 0)) })
	_, auditCursor := h.auditIDs(nil, 1)
	for name, cursor := range map[string][]byte{"AuditCursor": auditCursor, "Garbage": []byte("not-a-cursor")} {
		h.view(func(tx engine.Tx) error {
			_, err := tx.Operations(cursor, func(*durablev1.OperationRecord) bool { return true })
			if !errors.As(err, new(*engine.InvalidError)) {
				t.Errorf("Operations with a foreign cursor (%s): err = %v, want *engine.InvalidError", name, err)
			}
			return nil
		})
	}
}

func testOperationItemsInOrder(h *harness) {
	t := h.t
	refs := func(from, n int) []*durablev1.ActivityRef {
		var out []*durablev1.ActivityRef
		for i := from; i < from+n; i++ {
			out = append(out, &durablev1.ActivityRef{WorkflowId: fmt.Sprintf("wf-%d", i), ActivityId: "1"})
		}
		return out
	}
	render := func(rs []*durablev1.ActivityRef) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.GetWorkflowId())
		}
		return out
	}
	// Two chunks of one list, beside another operation's list.
	h.update(func(tx engine.Tx) error { return tx.PutOperationItems(7, 0, refs(0, 300)) })
	h.update(func(tx engine.Tx) error { return tx.PutOperationItems(7, 300, refs(300, 2)) })
	h.update(func(tx engine.Tx) error { return tx.PutOperationItems(8, 0, refs(1000, 3)) })
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.OperationItems(7, 254, 4)
		wantStrings(t, "items 254-257 of op 7", render(got), []string{"wf-254", "wf-255", "wf-256", "wf-257"})
		if err != nil {
			t.Fatal(err)
		}
		got, err = tx.OperationItems(7, 299, 10)
		wantStrings(t, "the end of op 7's list", render(got), []string{"wf-299", "wf-300", "wf-301"})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tx.OperationItems(7, 302, 10); len(got) != 0 {
			t.Errorf("past the end: %v", render(got))
		}
		got, _ = tx.OperationItems(8, 0, 10)
		wantStrings(t, "op 8's list", render(got), []string{"wf-1000", "wf-1001", "wf-1002"})
		return nil
	})
	var n int
	h.update(func(tx engine.Tx) (err error) {
		n, err = tx.DeleteOperationItems(7, 250)
		return err
	})
	if n != 250 {
		t.Errorf("DeleteOperationItems with limit 250 deleted %d", n)
	}
	h.update(func(tx engine.Tx) (err error) {
		n, err = tx.DeleteOperationItems(7, 1000)
		return err
	})
	if n != 52 {
		t.Errorf("second DeleteOperationItems deleted %d, want the 52 left", n)
	}
	h.written()
	h.view(func(tx engine.Tx) error {
		if got, _ := tx.OperationItems(7, 0, 10); len(got) != 0 {
			t.Errorf("op 7's list after deleting it: %v", render(got))
		}
		got, _ := tx.OperationItems(8, 0, 10)
		wantStrings(t, "op 8's list after deleting op 7's", render(got), []string{"wf-1000", "wf-1001", "wf-1002"})
		return nil
	})
	// A list with a hole is corrupt, not shorter.
	h.update(func(tx engine.Tx) error { return tx.PutOperationItems(9, 0, refs(0, 3)) })
	h.update(func(tx engine.Tx) error {
		_, err := tx.DeleteOperationItems(9, 1)
		return err
	})
	h.view(func(tx engine.Tx) error {
		if got, err := tx.OperationItems(9, 0, 3); err == nil {
			t.Errorf("a list missing its first item = %v, want an error: a list with a hole is corrupt", render(got))
		}
		return nil
	})
}

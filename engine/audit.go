package engine

import (
	"context"
	"errors"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// Every operator action is recorded in the audit log in the same store
// transaction as the action itself, so the log can neither miss an action
// that happened nor show one that did not. Records older than
// Options.AuditRetention are deleted by a janitor.

// DefaultAuditRetention is how long audit records are kept unless
// Options.AuditRetention says otherwise.
const DefaultAuditRetention = 90 * 24 * time.Hour

const (
	// auditPurgeEvery is how often the janitor looks for expired records.
	auditPurgeEvery = time.Hour
	// auditPurgeBatch bounds the records one purge transaction deletes.
	auditPurgeBatch = 1000
	// auditListedActivities bounds the activities one record names.
	auditListedActivities = 100
)

// Actor is who asks for an operator action, as the server authenticated it.
type Actor struct {
	// Principal is the authenticated name.
	Principal string
	// Role is the principal's role.
	Role string
}

// auditNote is an audit record a transition wrote: it goes to watchers once
// published, and to the log when log is set.
type auditNote struct {
	rec *durablev1.AuditRecord
	log bool
}

// newAudit starts the record of an action taken now.
func (e *Engine) newAudit(c *change, by Actor, rpc, reason string, now time.Time) *durablev1.AuditRecord {
	return &durablev1.AuditRecord{
		Id: e.nextID(c), Time: ts(now), Principal: by.Principal, Role: by.Role, Rpc: rpc, Reason: reason,
	}
}

// writeAudit stores r and notes it for the watchers and, with log, the log.
// The caller must not change r afterwards.
func (e *Engine) writeAudit(tx Tx, c *change, r *durablev1.AuditRecord, log bool) error {
	if err := tx.PutAudit(r); err != nil {
		return err
	}
	c.audits = append(c.audits, auditNote{rec: r, log: log})
	return nil
}

// logAudits logs the operator actions of a committed change at INFO.
func (e *Engine) logAudits(c *change) {
	for _, n := range c.audits {
		if !n.log {
			continue
		}
		r := n.rec
		e.opts.Logger.Info("operator action", "rpc", r.GetRpc(), "principal", r.GetPrincipal(), "role", r.GetRole(),
			"reason", r.GetReason(), "filter", filterText(r.GetFilter()), "matched", r.GetMatched(),
			"count", r.GetCount(), "done", r.GetDone(), "audit_id", r.GetId(), "operation_id", r.GetOperationId())
	}
}

// filterText renders a filter for the log; empty when there is none.
func filterText(f *durablev1.DeadLetterFilter) string {
	if f == nil {
		return ""
	}
	s := ""
	var after, before string
	if t := f.GetDeadLetteredAfter(); t != nil {
		after = t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	if t := f.GetDeadLetteredBefore(); t != nil {
		before = t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	for _, kv := range [][2]string{
		{"workflow_id", f.GetWorkflowId()}, {"activity_type", f.GetActivityType()}, {"failure_type", f.GetFailureType()},
		{"failure_fingerprint", f.GetFailureFingerprint()}, {"dead_lettered_after", after}, {"dead_lettered_before", before},
	} {
		if kv[1] == "" {
			continue
		}
		if s != "" {
			s += " "
		}
		s += kv[0] + "=" + kv[1]
	}
	if s == "" {
		return "all"
	}
	return s
}

// ListAuditRecords pages through the audit log, newest first; since, when
// set, ends it at the first record older than that.
func (e *Engine) ListAuditRecords(ctx context.Context, req *durablev1.ListAuditRecordsRequest) (*durablev1.ListAuditRecordsResponse, error) {
	size := pageSize(req.GetPageSize())
	resp := &durablev1.ListAuditRecordsResponse{}
	err := e.store.View(func(tx Tx) error {
		ended := false
		last, err := tx.AuditRecords(req.GetNextPageToken(), func(r *durablev1.AuditRecord) bool {
			if s := req.GetSince(); s != nil && r.GetTime().AsTime().Before(s.AsTime()) {
				ended = true
				return false
			}
			resp.Records = append(resp.Records, r)
			return len(resp.Records) < size
		})
		if err != nil {
			return err
		}
		if !ended && len(resp.Records) == size {
			resp.NextPageToken = last
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// auditJanitor deletes audit records past their retention, at start and then
// every auditPurgeEvery.
func (e *Engine) auditJanitor() {
	defer close(e.janitorDone)
	for {
		if !e.waitWritable() {
			return
		}
		if err := e.purgeAudit(); err != nil && !errors.Is(err, ErrClosed) && !refused(err) {
			e.opts.Logger.Error("purging expired audit records", "err", err)
		}
		select {
		case <-e.closeCh:
			return
		case <-e.clock.After(auditPurgeEvery):
		}
	}
}

// purgeAudit deletes every audit record older than the retention, a bounded
// batch per transaction. The deletions are not synced: a crash only means
// the next purge deletes them again.
func (e *Engine) purgeAudit() error {
	cutoff := e.now().Add(-e.opts.AuditRetention)
	for {
		var n int
		err := e.update(func(tx Tx, c *change) error {
			var err error
			n, err = tx.DeleteAuditBefore(cutoff, auditPurgeBatch)
			return err
		})
		if err != nil || n < auditPurgeBatch {
			return err
		}
	}
}

// cloneAudit copies r for a transition to write, so that a batch rerun
// never sees a record an earlier run changed.
func cloneAudit(r *durablev1.AuditRecord) *durablev1.AuditRecord {
	return proto.Clone(r).(*durablev1.AuditRecord)
}

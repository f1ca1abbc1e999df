package engine

import (
	"context"
	"fmt"
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// Policy overrides at run time: the RPCs that set, list and clear them, the
// table every decision reads (loaded from the store at start, swapped after
// each committed change), and what an override change does to activities
// already pending: their timers move and watchers get their new view.

// SetPolicyOverride replaces the override of an activity type (on one task
// queue, or on every queue) with req's patch, in one transaction with its
// audit record. Pending activities of the type follow it from their next
// decision; a running attempt's lease ends when the new start-to-close or
// heartbeat timeout says, earlier or later than before.
func (e *Engine) SetPolicyOverride(ctx context.Context, by Actor, req *durablev1.SetPolicyOverrideRequest) (*durablev1.PolicyOverride, error) {
	if _, fields := ApplyPatch(nil, req.GetPatch()); len(fields) == 0 {
		return nil, invalid("patch", "sets no field; name at least one to override")
	}
	var o *durablev1.PolicyOverride
	err := e.commit(func(tx Tx, c *change) error {
		now := e.now()
		rec := e.newAudit(c, by, "SetPolicyOverride", req.GetReason(), now)
		o = &durablev1.PolicyOverride{
			ActivityType: req.GetActivityType(), TaskQueue: req.GetTaskQueue(),
			Patch:  proto.CloneOf(req.GetPatch()),
			Reason: req.GetReason(), Principal: by.Principal, UpdatedTime: ts(now), AuditId: rec.GetId(),
		}
		if err := tx.PutPolicyOverride(o); err != nil {
			return err
		}
		rec.PolicyOverride = proto.CloneOf(o)
		rec.Matched, rec.Count, rec.Done = 1, 1, true
		if err := e.writeAudit(tx, c, rec, false); err != nil {
			return err
		}
		c.overrides = append(c.overrides, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.logOverride("SetPolicyOverride", by, req.GetReason(), o.GetAuditId(), o)
	e.followOverride(o.GetActivityType())
	return proto.CloneOf(o), nil
}

// ClearPolicyOverride removes the override of an activity type on a task
// queue ("" for the one on every queue), in one transaction with its audit
// record; the code's options are in force again from each pending
// activity's next decision. No such override is ErrNotFound.
func (e *Engine) ClearPolicyOverride(ctx context.Context, by Actor, req *durablev1.ClearPolicyOverrideRequest) (*durablev1.ClearPolicyOverrideResponse, error) {
	resp := &durablev1.ClearPolicyOverrideResponse{}
	var gone *durablev1.PolicyOverride
	err := e.commit(func(tx Tx, c *change) error {
		old, err := tx.GetPolicyOverride(req.GetActivityType(), req.GetTaskQueue())
		if err != nil {
			return err
		}
		if err := tx.DeletePolicyOverride(req.GetActivityType(), req.GetTaskQueue()); err != nil {
			return err
		}
		rec := e.newAudit(c, by, "ClearPolicyOverride", req.GetReason(), e.now())
		gone = proto.CloneOf(old)
		gone.Cleared = true
		rec.PolicyOverride = gone
		rec.Matched, rec.Count, rec.Done = 1, 1, true
		if err := e.writeAudit(tx, c, rec, false); err != nil {
			return err
		}
		c.overrides = append(c.overrides, gone)
		resp.Cleared, resp.AuditId = old, rec.GetId()
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.logOverride("ClearPolicyOverride", by, req.GetReason(), resp.GetAuditId(), gone)
	e.followOverride(gone.GetActivityType())
	return resp, nil
}

// ListPolicyOverrides returns the overrides in force, by activity type and
// then task queue.
func (e *Engine) ListPolicyOverrides(ctx context.Context, req *durablev1.ListPolicyOverridesRequest) (*durablev1.ListPolicyOverridesResponse, error) {
	resp := &durablev1.ListPolicyOverridesResponse{}
	for _, o := range e.overrideTable().sorted() {
		resp.Overrides = append(resp.Overrides, proto.CloneOf(o))
	}
	return resp, nil
}

// logOverride logs an override change at INFO, as every operator action is:
// who, why, the override set or cleared and the audit record of the change.
func (e *Engine) logOverride(rpc string, by Actor, reason string, auditID int64, o *durablev1.PolicyOverride) {
	e.opts.Logger.Info("operator action", "rpc", rpc, "principal", by.Principal, "role", by.Role,
		"reason", reason, "activity_type", o.GetActivityType(), "task_queue", o.GetTaskQueue(),
		"fields", strings.Join(patchFields(o.GetPatch()), ","), "audit_id", auditID)
}

// patchFields names the fields a patch sets.
func patchFields(p *durablev1.OptionsPatch) []string {
	_, fields := ApplyPatch(nil, p)
	return fields
}

// overrideTable is the table in force.
func (e *Engine) overrideTable() overrideTable {
	if t := e.overrides.Load(); t != nil {
		return *t
	}
	return nil
}

// loadOverrides reads the overrides from the store, at start.
func (e *Engine) loadOverrides(tx Tx) error {
	os, err := tx.PolicyOverrides()
	if err != nil {
		return fmt.Errorf("load policy overrides: %w", err)
	}
	t := overrideTable(nil).with(os)
	e.overrides.Store(&t)
	return nil
}

// applyOverridesLocked puts a committed change's overrides in force, before
// the change is published, so that its watchers see views under them.
func (e *Engine) applyOverridesLocked(changes []*durablev1.PolicyOverride) {
	if len(changes) == 0 {
		return
	}
	t := e.overrideTable().with(changes)
	e.overrides.Store(&t)
}

func (e *Engine) policyDefaults() PolicyDefaults {
	return PolicyDefaults{MaxAttempts: int32(e.opts.DLQAfterAttempts), StartToClose: e.opts.DefaultStartToClose}
}

// decisionView is the activity as its next decision sees it: the record
// itself when no override applies to it (the rules then read its own
// options), else a copy with the override in force. Callers only read it.
func (e *Engine) decisionView(in *durablev1.PendingActivity) *durablev1.PendingActivity {
	return viewUnder(in, e.overrideTable().lookup(in.GetActivityType(), in.GetTaskQueue()), e.policyDefaults())
}

// showInForce fills the in-force fields of an activity that leaves the
// engine (describe, dead-letter lists, Watch), so that what a reader sees is
// right at the time it reads. in must be the caller's own copy.
func (e *Engine) showInForce(in *durablev1.PendingActivity) {
	InForce(in, e.overrideTable().lookup(in.GetActivityType(), in.GetTaskQueue()), e.policyDefaults())
}

// timersOf is TimersOf under the policy in force: the lease timer at the
// lease deadline the options in force give now, the schedule-to-close timer
// at the expiry they give, rather than what the record stored when it was
// last written.
func (e *Engine) timersOf(a *durablev1.ActivityRecord) []Timer {
	return timersUnder(a, e.decisionView(a.GetInfo()))
}

// followOverride brings the activities of one type in line with the
// overrides now in force: the timers of the live ones move to where the
// options in force put them (a timer moved later than before also fires
// harmlessly early, see fire), and watchers get every one's new view. It
// holds the engine's lock throughout, so no transition publishes between
// the read and the send: a later change of the same activity reaches the
// watchers after this view, never before. (A Watch registering meanwhile
// waits for the lock; its snapshot's view already holds the change.)
// It reads the activities of the type from the store's state index, so its
// cost is that of the type's activities, not of every one. The change is
// committed whatever happens here; should the read fail, the timers are
// right again at the next start, and a timer that fires early re-arms
// itself.
func (e *Engine) followOverride(activityType string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	before := e.nextTimerLocked()
	watched := len(e.watchers) > 0
	var views []*durablev1.PendingActivity
	err := e.store.View(func(tx Tx) error {
		for _, state := range []durablev1.ActivityState{stateScheduled, stateStarted, stateRetrying, stateDead} {
			_, err := tx.ActivitiesByState(StateRange{State: state, ActivityType: activityType}, nil, func(a *durablev1.ActivityRecord) bool {
				in := a.GetInfo()
				if in.GetState() != stateDead {
					for _, t := range e.timersOf(a) {
						e.setTimerLocked(t)
					}
				}
				if watched {
					e.showInForce(in)
					views = append(views, in)
				}
				return true
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.opts.Logger.Error("moving timers after a policy override change", "activity_type", activityType, "err", err)
		return
	}
	if next := e.nextTimerLocked(); !next.IsZero() && (before.IsZero() || next.Before(before)) {
		select {
		case e.timerWake <- struct{}{}:
		default:
		}
	}
	e.sendViewsLocked(views)
}

package engine

import (
	"cmp"
	"errors"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// An activity that ends (it completed, failed for good, or was still pending
// when its workflow closed) leaves its record behind as a FinishedActivity,
// every attempt and its failure included, in the same transaction that ends
// it: after an incident the trail says what went wrong even for the
// activities that got through in the end. Finished activities older than
// Options.AttemptRetention are deleted by a janitor, and never shown.

// DefaultAttemptRetention is how long finished activities are kept unless
// Options.AttemptRetention says otherwise.
const DefaultAttemptRetention = 7 * 24 * time.Hour

// How an activity finished, as FinishedActivity.outcome spells it.
const (
	// FinishedCompleted: an attempt completed.
	FinishedCompleted = "completed"
	// FinishedFailed: an attempt failed with a failure that is not retried;
	// the workflow saw ActivityTaskFailed.
	FinishedFailed = "failed"
	// FinishedWorkflowClosed: the workflow completed or failed while the
	// activity was still pending, dead-lettered included.
	FinishedWorkflowClosed = "workflow_closed"
)

const (
	// finishedPurgeBatch bounds the finished activities one purge
	// transaction deletes.
	finishedPurgeBatch = 1000
	// maxDescribedFinished bounds the finished activities one describe
	// returns: the newest, so a workflow that ran a million activities
	// still describes in one reply.
	maxDescribedFinished = 1000
)

// finishedRecord is what is kept of an activity that ended at now. The
// heartbeat details go: they are a checkpoint for the next attempt, which
// will not come, and can be as large as a payload; their time stays. So do
// the lease deadline and the next attempt time, which no longer say
// anything. An attempt that was running when the workflow closed stays
// without an end: nobody knows how it ended.
func finishedRecord(in *durablev1.PendingActivity, outcome string, now time.Time) *durablev1.FinishedActivity {
	kept := proto.Clone(in).(*durablev1.PendingActivity)
	kept.HeartbeatDetails = nil
	kept.LeaseDeadline = nil
	kept.NextAttemptTime = nil
	return &durablev1.FinishedActivity{Activity: kept, Outcome: outcome, FinishedTime: ts(now)}
}

// keepFinished writes the finished record of an activity that ends now. The
// caller deletes the activity in the same transition.
func keepFinished(tx Tx, a *durablev1.ActivityRecord, outcome string, now time.Time) error {
	return tx.PutFinishedActivity(finishedRecord(a.GetInfo(), outcome, now))
}

// startedEvent is the ActivityTaskStarted event of the attempt that ends the
// activity. It is written when the attempt ends, beside the event that says
// how, and carries the time the attempt started: an event's time is when
// it happened, while its id keeps the order in which history learnt of it.
func startedEvent(a *durablev1.ActivityRecord) *durablev1.HistoryEvent {
	in := a.GetInfo()
	return &durablev1.HistoryEvent{
		Type: evActivityStarted, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), Attempt: in.GetAttempt(),
		Identity: in.GetLastWorkerIdentity(), ScheduledEventId: a.GetScheduledEventId(), Time: in.GetLastStartedTime(),
	}
}

// describedFinished picks what DescribeWorkflow shows of a workflow's
// finished activities: those inside the retention (the janitor may not have
// come by yet), at most maxDescribedFinished of the newest, oldest first.
func describedFinished(all []*durablev1.FinishedActivity, cutoff time.Time) []*durablev1.FinishedActivity {
	kept := slices.DeleteFunc(all, func(f *durablev1.FinishedActivity) bool {
		return f.GetFinishedTime().AsTime().Before(cutoff)
	})
	slices.SortStableFunc(kept, func(a, b *durablev1.FinishedActivity) int {
		return cmp.Or(a.GetFinishedTime().AsTime().Compare(b.GetFinishedTime().AsTime()),
			cmp.Compare(a.GetActivity().GetActivityId(), b.GetActivity().GetActivityId()))
	})
	return kept[max(len(kept)-maxDescribedFinished, 0):]
}

// trailJanitor deletes finished activities past their retention, at start
// and then every purge interval: an hour, or the retention when that is
// shorter.
func (e *Engine) trailJanitor() {
	defer close(e.trailJanitorDone)
	every := min(time.Hour, e.opts.AttemptRetention)
	for {
		if !e.waitWritable() {
			return
		}
		if err := e.purgeFinished(); err != nil && !errors.Is(err, ErrClosed) && !refused(err) {
			e.opts.Logger.Error("purging expired finished activities", "err", err)
		}
		select {
		case <-e.closeCh:
			return
		case <-e.clock.After(every):
		}
	}
}

// purgeFinished deletes every finished activity older than the retention, a
// bounded batch per transaction. The deletions are not synced: a crash only
// means the next purge deletes them again.
func (e *Engine) purgeFinished() error {
	cutoff := e.now().Add(-e.opts.AttemptRetention)
	for {
		var n int
		err := e.update(func(tx Tx, c *change) error {
			var err error
			n, err = tx.DeleteFinishedBefore(cutoff, finishedPurgeBatch)
			return err
		})
		if err != nil || n < finishedPurgeBatch {
			return err
		}
	}
}

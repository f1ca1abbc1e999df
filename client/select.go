package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The calls that take a Selection: each asks the daemon with the fields it
// has, and narrows what comes back with Matches when the selection has
// words the daemon cannot apply, so that wf and the console act on the same
// set for the same words.

// ErrNoneSelected is returned by RedriveSelection when a selection the
// daemon cannot apply by itself matches no dead letter: there is nothing to
// start an operation for.
var ErrNoneSelected = errors.New("no dead letter matches the selection")

// SelectDeadLetters returns the dead letters s selects, oldest first.
func (c *Client) SelectDeadLetters(ctx context.Context, s Selection) ([]*durablev1.PendingActivity, error) {
	if err := s.ForDeadLetters(); err != nil {
		return nil, err
	}
	f, exact := s.DeadLetterFilter()
	letters, err := c.ListDeadLetters(ctx, filterOf(f))
	if err != nil || exact {
		return letters, err
	}
	return narrow(letters, s, time.Now()), nil
}

// SelectActivities returns the pending activities s selects, in the order of
// ListActivities.
func (c *Client) SelectActivities(ctx context.Context, s Selection) ([]*durablev1.PendingActivity, error) {
	req, exact := s.ListActivitiesRequest()
	acts, err := c.ListActivities(ctx, ActivityFilter{
		State: req.GetState(), MinAttempt: req.GetMinAttempt(), FailureType: req.GetFailureType(),
		FailureFingerprint: req.GetFailureFingerprint(), ActivityType: req.GetActivityType(), TaskQueue: req.GetTaskQueue(),
	})
	if err != nil || exact {
		return acts, err
	}
	now := time.Now()
	if s.NoPoller {
		// nopoller by the daemon's rule when it reports its queues; a
		// daemon that does not falls back to the wait alone.
		if queues, at, err := c.TaskQueues(ctx, ""); err == nil {
			if at.After(time.Unix(0, 0)) {
				now = at
			}
			out := acts[:0]
			for _, a := range acts {
				if s.MatchesOnQueues(a, now, queues) {
					out = append(out, a)
				}
			}
			return out, nil
		} else if status.Code(err) != codes.Unimplemented {
			return nil, err
		}
	}
	return narrow(acts, s, now), nil
}

// RedriveSelection starts a redrive operation on the dead letters s selects.
// When the daemon can apply s by itself, the operation carries its filter
// (and selects the letters when it starts, as RedriveAll); otherwise the
// letters are selected here and sent by name (as RedriveList), and when
// there are none it returns ErrNoneSelected.
func (c *Client) RedriveSelection(ctx context.Context, s Selection, opts ...RedriveOption) (*durablev1.Operation, error) {
	if err := s.ForDeadLetters(); err != nil {
		return nil, err
	}
	if f, exact := s.DeadLetterFilter(); exact {
		return c.RedriveAll(ctx, filterOf(f), opts...)
	}
	refs, err := c.selectRefs(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		return nil, ErrNoneSelected
	}
	return c.RedriveList(ctx, refs, opts...)
}

// RedriveSelectionDryRun says what RedriveSelection would select now: how
// many letters and the first 100, oldest first. It starts nothing.
func (c *Client) RedriveSelectionDryRun(ctx context.Context, s Selection, opts ...RedriveOption) (*durablev1.RedriveDeadLettersResponse, error) {
	if err := s.ForDeadLetters(); err != nil {
		return nil, err
	}
	if f, exact := s.DeadLetterFilter(); exact {
		return c.RedriveDryRun(ctx, filterOf(f), opts...)
	}
	refs, err := c.selectRefs(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		return &durablev1.RedriveDeadLettersResponse{}, nil
	}
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{
		Activities: refs, Rate: o.rate, Reason: o.reason, Edit: o.edit, DryRun: true,
	})
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters (dry run): %w", err)
	}
	return resp, nil
}

func (c *Client) selectRefs(ctx context.Context, s Selection) ([]*durablev1.ActivityRef, error) {
	letters, err := c.SelectDeadLetters(ctx, s)
	if err != nil {
		return nil, err
	}
	refs := make([]*durablev1.ActivityRef, 0, len(letters))
	for _, a := range letters {
		refs = append(refs, &durablev1.ActivityRef{WorkflowId: a.GetWorkflowId(), ActivityId: a.GetActivityId()})
	}
	return refs, nil
}

func narrow(acts []*durablev1.PendingActivity, s Selection, now time.Time) []*durablev1.PendingActivity {
	out := acts[:0]
	for _, a := range acts {
		if s.MatchesAt(a, now) {
			out = append(out, a)
		}
	}
	return out
}

// filterOf is the daemon's filter message as a DeadLetterFilter.
func filterOf(f *durablev1.DeadLetterFilter) DeadLetterFilter {
	out := DeadLetterFilter{
		WorkflowID: f.GetWorkflowId(), ActivityType: f.GetActivityType(),
		FailureType: f.GetFailureType(), FailureFingerprint: f.GetFailureFingerprint(),
	}
	if t := f.GetDeadLetteredAfter(); t != nil {
		out.DeadLetteredAfter = t.AsTime()
	}
	if t := f.GetDeadLetteredBefore(); t != nil {
		out.DeadLetteredBefore = t.AsTime()
	}
	return out
}

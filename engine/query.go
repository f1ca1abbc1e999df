package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func pageSize(n int32) int {
	if n <= 0 {
		return defaultPageSize
	}
	return min(int(n), maxPageSize)
}

// view runs fn in a read-only transaction after firing due timers, so what
// it reads reflects the engine's clock; while writes are refused no timer
// fires and it reads the state as it is.
func (e *Engine) view(fn func(tx Tx) error) error {
	if err := e.fireDue(); err != nil && !refused(err) {
		return err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return e.store.View(fn)
}

// DescribeWorkflow returns a workflow, its pending activities and the
// activities that finished within the attempt retention (the workflow
// alone with workflow_only). With wait_for_close it first waits for the
// workflow to close, up to the poll timeout or ctx's end, whichever is
// first.
func (e *Engine) DescribeWorkflow(ctx context.Context, req *durablev1.DescribeWorkflowRequest) (*durablev1.DescribeWorkflowResponse, error) {
	if req.GetWaitForClose() {
		if err := e.waitForClose(ctx, req.GetWorkflowId()); err != nil {
			return nil, err
		}
	}
	resp := &durablev1.DescribeWorkflowResponse{}
	err := e.view(func(tx Tx) error {
		w, err := tx.GetWorkflow(req.GetWorkflowId())
		if err != nil {
			return err
		}
		showWorkflowTask(w)
		resp.Workflow = w.GetInfo()
		if req.GetWorkflowOnly() {
			return nil
		}
		acts, err := tx.Activities(req.GetWorkflowId())
		if err != nil {
			return err
		}
		for _, a := range acts {
			e.showInForce(a.GetInfo())
			resp.PendingActivities = append(resp.PendingActivities, a.GetInfo())
		}
		finished, err := tx.FinishedActivities(req.GetWorkflowId())
		resp.FinishedActivities = describedFinished(finished, e.now().Add(-e.opts.AttemptRetention))
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (e *Engine) waitForClose(ctx context.Context, id string) error {
	ch := make(chan struct{})
	e.mu.Lock()
	var running bool
	err := e.store.View(func(tx Tx) error {
		w, err := tx.GetWorkflow(id)
		if err != nil {
			return err
		}
		running = w.GetInfo().GetStatus() == statusRunning
		return nil
	})
	if err == nil && running {
		e.closeSubs[id] = append(e.closeSubs[id], ch)
	}
	e.mu.Unlock()
	if err != nil || !running {
		return err
	}
	select {
	case <-ch:
	case <-ctx.Done():
	case <-e.closeCh:
	case <-e.clock.After(e.opts.PollTimeout):
	}
	e.mu.Lock()
	subs := e.closeSubs[id]
	for i, c := range subs {
		if c == ch {
			e.closeSubs[id] = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if len(e.closeSubs[id]) == 0 {
		delete(e.closeSubs, id)
	}
	e.mu.Unlock()
	return nil
}

// GetWorkflowHistory returns a workflow's events in order.
func (e *Engine) GetWorkflowHistory(ctx context.Context, req *durablev1.GetWorkflowHistoryRequest) (*durablev1.GetWorkflowHistoryResponse, error) {
	resp := &durablev1.GetWorkflowHistoryResponse{}
	err := e.view(func(tx Tx) error {
		if _, err := tx.GetWorkflow(req.GetWorkflowId()); err != nil {
			return err
		}
		h, err := tx.History(req.GetWorkflowId())
		resp.Events = h
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ListWorkflows pages through workflows in id order; the page token is a
// workflow cursor (see workflowCursor) naming the last id of the previous
// page. A token that is not one is an *InvalidError naming next_page_token,
// as a dead-letter or audit token is in their lists.
func (e *Engine) ListWorkflows(ctx context.Context, req *durablev1.ListWorkflowsRequest) (*durablev1.ListWorkflowsResponse, error) {
	size := pageSize(req.GetPageSize())
	after, err := decodeWorkflowCursor(req.GetNextPageToken())
	if err != nil {
		return nil, err
	}
	resp := &durablev1.ListWorkflowsResponse{}
	err = e.view(func(tx Tx) error {
		for len(resp.Workflows) < size {
			page, err := tx.ListWorkflows(after, size)
			if err != nil {
				return err
			}
			for _, w := range page {
				after = w.GetInfo().GetWorkflowId()
				if req.GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED && w.GetInfo().GetStatus() != req.GetStatus() {
					continue
				}
				showWorkflowTask(w)
				resp.Workflows = append(resp.Workflows, w.GetInfo())
				if len(resp.Workflows) == size {
					resp.NextPageToken = workflowCursor(after)
					return nil
				}
			}
			if len(page) < size {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ListDeadLetters pages through dead letters, oldest first, that match every
// filter given. The dead-lettered time bounds are a range of the index the
// store seeks to; the other filters are checked on the letters read. A page
// reads at most maxScanned letters, so it may end with fewer than page_size
// (even none) and a token to go on from.
func (e *Engine) ListDeadLetters(ctx context.Context, req *durablev1.ListDeadLettersRequest) (*durablev1.ListDeadLettersResponse, error) {
	size := pageSize(req.GetPageSize())
	filter := &durablev1.DeadLetterFilter{
		WorkflowId: req.GetWorkflowId(), ActivityType: req.GetActivityType(), FailureType: req.GetFailureType(),
		FailureFingerprint: req.GetFailureFingerprint(),
		DeadLetteredAfter:  req.GetDeadLetteredAfter(), DeadLetteredBefore: req.GetDeadLetteredBefore(),
	}
	resp := &durablev1.ListDeadLettersResponse{}
	err := e.view(func(tx Tx) error {
		scanned, full := 0, false
		last, err := tx.DeadLettersIn(deadLetteredRange(filter), req.GetNextPageToken(), func(a *durablev1.ActivityRecord) bool {
			scanned++
			if in := a.GetInfo(); matchesDeadLetter(in, filter) {
				e.showInForce(in)
				resp.DeadLetters = append(resp.DeadLetters, in)
			}
			full = len(resp.DeadLetters) == size || scanned == maxScanned
			return !full
		})
		if err != nil {
			return err
		}
		if full {
			resp.NextPageToken = last
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ListActivityStats returns attempt latency percentiles per activity type,
// by type: of the attempts that ended in the hours at or after since (the
// hour since falls in included), or of every attempt counted when since is
// unset. Each type comes with the options in force for it (those of its most
// recently scheduled activity under the override of its type and queue).
// Types with no attempt in the window are left out.
func (e *Engine) ListActivityStats(ctx context.Context, req *durablev1.ListActivityStatsRequest) (*durablev1.ListActivityStatsResponse, error) {
	resp := &durablev1.ListActivityStatsResponse{}
	var since time.Time
	if s := req.GetSince(); s != nil {
		since = hourOf(s.AsTime())
	}
	err := e.store.View(func(tx Tx) error {
		types, err := tx.ListLatency()
		if err != nil {
			return err
		}
		sums := map[string]*durablev1.LatencyRecord{}
		last := map[string]*durablev1.ActivityOptions{}
		add := func(l *durablev1.LatencyRecord) bool {
			sum := sums[l.GetActivityType()]
			if sum == nil {
				sum = &durablev1.LatencyRecord{ActivityType: l.GetActivityType()}
				sums[l.GetActivityType()] = sum
			}
			mergeLatency(sum, l)
			return true
		}
		for _, l := range types {
			last[l.GetActivityType()] = l.GetLastOptions()
			if req.GetSince() == nil {
				add(l)
			}
		}
		if err := tx.LatencyHours(since, add); err != nil {
			return err
		}
		for _, typ := range slices.Sorted(maps.Keys(sums)) {
			if sums[typ].GetAttempts() == 0 {
				continue
			}
			st := statsOf(sums[typ])
			if opts := last[typ]; opts != nil {
				st.OptionsInForce, st.OverriddenFields = e.typeInForce(typ, opts)
			}
			resp.Stats = append(resp.Stats, st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// typeInForce is the policy in force for a type whose newest activity was
// scheduled with opts.
func (e *Engine) typeInForce(typ string, opts *durablev1.ActivityOptions) (*durablev1.ActivityOptions, []string) {
	view := &durablev1.PendingActivity{
		ActivityType: typ, TaskQueue: opts.GetTaskQueue(), Options: opts,
		MaxAttempts: opts.GetRetryPolicy().GetMaxAttempts(),
	}
	if view.MaxAttempts <= 0 {
		view.MaxAttempts = int32(e.opts.DLQAfterAttempts)
	}
	e.showInForce(view)
	return view.GetOptionsInForce(), view.GetOverriddenFields()
}

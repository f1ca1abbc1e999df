package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Redrive operations: the daemon releases the letters at its own pace,
// durably, whatever happens to the caller. A client starts one, follows it
// and may cancel it; quitting does not stop it.

// RedriveAll starts a redrive operation on every dead letter that matches f
// now (the zero filter matches all) and returns it at once: the daemon
// releases them oldest first at a steady rate (WithRate; default 50 per
// second), across restarts, with one audit record that counts up. Follow it
// with WaitOperation, stop it with CancelOperation.
func (c *Client) RedriveAll(ctx context.Context, f DeadLetterFilter, opts ...RedriveOption) (*durablev1.Operation, error) {
	return c.startRedrive(ctx, &durablev1.RedriveDeadLettersRequest{Filter: f.Proto()}, opts)
}

// RedriveList is RedriveAll for exactly the letters listed (those of them
// dead-lettered now), as a console that showed them to an operator sends
// them.
func (c *Client) RedriveList(ctx context.Context, refs []*durablev1.ActivityRef, opts ...RedriveOption) (*durablev1.Operation, error) {
	return c.startRedrive(ctx, &durablev1.RedriveDeadLettersRequest{Activities: refs}, opts)
}

func (c *Client) startRedrive(ctx context.Context, req *durablev1.RedriveDeadLettersRequest, opts []RedriveOption) (*durablev1.Operation, error) {
	o := redriveOpts(opts)
	req.Rate, req.Reason, req.Edit = o.rate, o.reason, o.edit
	resp, err := c.svc.RedriveDeadLetters(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters: %w", err)
	}
	return resp.GetOperation(), nil
}

// RedriveDryRun says what RedriveAll would select now: how many letters
// match f, and the first 100 of them, oldest first. It starts nothing and
// writes nothing. The options are checked as RedriveAll would check them.
func (c *Client) RedriveDryRun(ctx context.Context, f DeadLetterFilter, opts ...RedriveOption) (*durablev1.RedriveDeadLettersResponse, error) {
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{
		Filter: f.Proto(), Rate: o.rate, Reason: o.reason, Edit: o.edit, DryRun: true,
	})
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters (dry run): %w", err)
	}
	return resp, nil
}

// DescribeOperation returns one operation and its progress.
func (c *Client) DescribeOperation(ctx context.Context, id string) (*durablev1.Operation, error) {
	op, err := c.svc.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: id})
	if err != nil {
		return nil, fmt.Errorf("describe operation %s: %w", id, err)
	}
	return op, nil
}

// ListOperations returns operations, newest first, following page tokens;
// limit bounds how many (0: all).
func (c *Client) ListOperations(ctx context.Context, limit int) ([]*durablev1.Operation, error) {
	var out []*durablev1.Operation
	req := &durablev1.ListOperationsRequest{PageSize: pageSize}
	for {
		if limit > 0 {
			req.PageSize = int32(min(pageSize, limit-len(out)))
		}
		resp, err := c.svc.ListOperations(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list operations: %w", err)
		}
		out = append(out, resp.GetOperations()...)
		req.NextPageToken = resp.GetNextPageToken()
		if len(req.NextPageToken) == 0 || limit > 0 && len(out) >= limit {
			return out, nil
		}
	}
}

// CancelOperation stops a running operation and returns it as it stopped:
// what it released stays released, the rest stays in the dead-letter queue.
// Once it returns, the daemon releases nothing more of it. An operation
// that has finished fails with FailedPrecondition.
func (c *Client) CancelOperation(ctx context.Context, id, reason string) (*durablev1.Operation, error) {
	op, err := c.svc.CancelOperation(ctx, &durablev1.CancelOperationRequest{Id: id, Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("cancel operation %s: %w", id, err)
	}
	return op, nil
}

// operationPollEvery is how often WaitOperation asks for progress.
const operationPollEvery = 200 * time.Millisecond

// WaitOperation follows an operation until it has finished (completed or
// cancelled) or ctx ends, and returns it as it finished. progress, if set,
// sees it first as it is and then every time its progress or state
// changes.
//
// It asks DescribeOperation five times a second rather than subscribing to
// Watch: one small read per poll, where a Watch would stream a snapshot of
// every pending activity and then every change in the daemon to follow one
// counter, and could be cut off as a slow reader in the very incident it is
// following. A daemon that is unavailable for a while (restarting) is waited
// for, since the operation goes on when it is back.
func (c *Client) WaitOperation(ctx context.Context, id string, progress func(*durablev1.Operation)) (*durablev1.Operation, error) {
	var last *durablev1.Operation
	for {
		op, err := c.svc.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: id})
		switch {
		case err == nil:
			if progress != nil && (last == nil || moved(last, op)) {
				progress(op)
			}
			last = op
			if op.GetState() != durablev1.OperationState_OPERATION_STATE_RUNNING {
				return op, nil
			}
		case status.Code(err) == codes.Unavailable && ctx.Err() == nil:
			// The daemon is restarting; the operation resumes with it.
		default:
			if cerr := contextCause(ctx, err); cerr != nil {
				return last, cerr
			}
			return last, fmt.Errorf("wait for operation %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(operationPollEvery):
		}
	}
}

// moved reports whether an operation's progress or state changed.
func moved(a, b *durablev1.Operation) bool {
	return a.GetState() != b.GetState() || a.GetReleased() != b.GetReleased() || a.GetSkipped() != b.GetSkipped() ||
		a.GetReDeadLettered() != b.GetReDeadLettered()
}

// Package backlog is the resumable activity: one long activity walks a
// backlog of items in batches, heartbeats its position and accumulator after
// each batch, and on a retry resumes from the last heartbeat's details instead
// of from item 0. Each item's effect goes through the sink under its own key
// (<idempotency key>/<index>), so the slice redone after a crash is harmless.
package backlog

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/workflow"
)

// Names under which a worker registers the backlog demo.
const (
	WorkflowName = "Backlog"
	ActivityName = "AnalyzeBacklog"
)

// Defaults applied to zero Input fields.
const (
	DefaultItems = 4000
	DefaultBatch = 200
	// DefaultHeartbeatTimeout is well above the time one batch takes, as the
	// worker throttles heartbeats to 80% of the timeout.
	DefaultHeartbeatTimeout = 2 * time.Second
)

// FailureOutage is the retryable failure of every attempt while a worker runs
// with --outage.
const FailureOutage = "DownstreamUnavailable"

// Input is Backlog's input (`wf start Backlog --items 4000 --batch 200`).
type Input struct {
	// Items is the length of the backlog; default 4000.
	Items int `json:"items"`
	// Batch is the checkpoint granularity, which bounds the work redone after
	// a crash; default 200.
	Batch int `json:"batch"`
	// HeartbeatTimeoutMS fails an attempt that goes this long without a
	// heartbeat; default 2000.
	HeartbeatTimeoutMS int `json:"heartbeat_timeout_ms"`
}

// Checkpoint is the heartbeat payload: enough to resume exactly.
type Checkpoint struct {
	NextIndex int `json:"next_index"`
	Acc       Acc `json:"acc"`
}

// Acc is the accumulator: small enough to carry on every heartbeat.
type Acc struct {
	// Items counts the items merged.
	Items int `json:"items"`
	// Classes counts items per class.
	Classes map[string]int `json:"classes"`
	// Checksum is the sum of the items' hashes: equal only if every item was
	// merged exactly once.
	Checksum uint64 `json:"checksum"`
}

// Summary is the activity's and the workflow's result.
type Summary struct {
	Acc Acc `json:"acc"`
	// ResumedFrom is the index the successful attempt started at: 0 for an
	// uninterrupted run, the last heartbeated next_index after a crash.
	ResumedFrom int `json:"resumed_from"`
	// Attempt is the attempt that finished.
	Attempt int `json:"attempt"`
}

// Backlog runs AnalyzeBacklog once, with a heartbeat timeout and a short
// retry policy so that a killed worker's attempt is retried within seconds.
func Backlog(ctx workflow.Context, in Input) (Summary, error) {
	in = in.withDefaults()
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Duration(in.HeartbeatTimeoutMS) * time.Millisecond,
		RetryPolicy: &workflow.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Second,
			MaximumAttempts:    10,
		},
	})
	var s Summary
	err := workflow.ExecuteActivity(ctx, ActivityName, in).Get(ctx, &s)
	return s, err
}

func (in Input) withDefaults() Input {
	if in.Items <= 0 {
		in.Items = DefaultItems
	}
	if in.Batch <= 0 {
		in.Batch = DefaultBatch
	}
	if in.HeartbeatTimeoutMS <= 0 {
		in.HeartbeatTimeoutMS = int(DefaultHeartbeatTimeout / time.Millisecond)
	}
	return in
}

// livenessEvery is how many items pass between heartbeats that only keep the
// lease (the worker throttles what it sends anyway).
const livenessEvery = 10

// Activities holds AnalyzeBacklog's dependencies; register its method with
// RegisterActivityWithName(a.AnalyzeBacklog, ActivityName).
type Activities struct {
	// Sink receives one effect per item.
	Sink sink.Sink
	// Outage makes every attempt fail with the retryable
	// DownstreamUnavailable before doing any work.
	Outage bool
}

// AnalyzeBacklog walks items [resume, Items) in batches, applying each item's
// effect and merging its class into the accumulator, and heartbeats
// {next_index, acc} after every batch. It resumes from the last heartbeat
// details of an earlier attempt.
func (a *Activities) AnalyzeBacklog(ctx context.Context, in Input) (Summary, error) {
	in = in.withDefaults()
	if a.Outage {
		return Summary{}, activity.NewError(FailureOutage, "downstream is unavailable (worker runs with --outage)")
	}
	cp := Checkpoint{Acc: Acc{Classes: map[string]int{}}}
	if b := activity.HeartbeatDetails(ctx); len(b) > 0 {
		if err := json.Unmarshal(b, &cp); err != nil {
			return Summary{}, activity.NewNonRetryable("BadCheckpoint", err.Error())
		}
		if cp.Acc.Classes == nil {
			cp.Acc.Classes = map[string]int{}
		}
	}
	resume := cp.NextIndex
	key := activity.IdempotencyKey(ctx)
	// last is the checkpoint of the last batch boundary. Between boundaries
	// it is re-sent every few items: that keeps the lease alive however long
	// a batch takes, without moving the checkpoint off a boundary.
	last, err := json.Marshal(cp)
	if err != nil {
		return Summary{}, err
	}
	for i := resume; i < in.Items; i += in.Batch {
		end := min(i+in.Batch, in.Items)
		for j := i; j < end; j++ {
			if (j-i)%livenessEvery == 0 {
				activity.RecordHeartbeat(ctx, last)
			}
			// Items between the last heartbeat and a crash are redone: the
			// per-item key makes their effects idempotent.
			if _, err := a.Sink.Apply(ctx, key+"/"+strconv.Itoa(j)); err != nil {
				return Summary{}, fmt.Errorf("item %d: %w", j, err)
			}
			cp.Acc.merge(j)
		}
		cp.NextIndex = end
		if last, err = json.Marshal(cp); err != nil {
			return Summary{}, err
		}
		activity.RecordHeartbeat(ctx, last)
		if err := ctx.Err(); err != nil {
			return Summary{}, context.Cause(ctx)
		}
	}
	return Summary{Acc: cp.Acc, ResumedFrom: resume, Attempt: activity.Attempt(ctx)}, nil
}

var classes = [...]string{"bug", "feature", "question", "incident"}

// Classify is the stand-in for the model call: a pure function of the item.
func Classify(i int) (class string, hash uint64) {
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(i)))
	hash = h.Sum64()
	return classes[hash%uint64(len(classes))], hash
}

func (a *Acc) merge(i int) {
	c, h := Classify(i)
	a.Items++
	a.Classes[c]++
	a.Checksum += h
}

// Expected is the accumulator of an uninterrupted walk of items items.
func Expected(items int) Acc {
	a := Acc{Classes: map[string]int{}}
	for i := range items {
		a.merge(i)
	}
	return a
}

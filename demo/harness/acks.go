package harness

import (
	"encoding/json"
	"fmt"
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// AckPrefix starts the line a demo worker run with --log-reports writes for
// each activity report the daemon acknowledged; a JSON Ack follows.
const AckPrefix = "report acknowledged: "

// Ack is one activity report a daemon acknowledged to a worker.
type Ack struct {
	WorkflowID string `json:"workflow_id"`
	ActivityID string `json:"activity_id"`
	Attempt    int32  `json:"attempt"`
	// Completed is true for a completion; otherwise the attempt failed
	// with FailureType.
	Completed   bool   `json:"completed"`
	FailureType string `json:"failure_type,omitempty"`
	// Worker is the identity of the worker that reported it (filled in by
	// the Cluster).
	Worker string `json:"worker,omitempty"`
}

// parseAck reads an AckPrefix line of the worker named worker.
func parseAck(line, worker string) (Ack, bool) {
	i := strings.Index(line, AckPrefix)
	if i < 0 {
		return Ack{}, false
	}
	var a Ack
	if err := json.Unmarshal([]byte(line[i+len(AckPrefix):]), &a); err != nil {
		return Ack{}, false
	}
	a.Worker = worker
	return a, true
}

// Acks returns the reports acknowledged to the Cluster's workers so far.
func (c *Cluster) Acks() []Ack {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Ack(nil), c.acks...)
}

// lostAcks returns, for the acknowledged reports of workflow id, those the
// workflow's record contradicts: a completion of an activity that did not
// complete with that attempt, a failure of an attempt that the attempt
// trail shows ending otherwise (not at all, or with another failure, such as
// a lease that ran out). Attempts left out of a truncated trail are not
// checked.
func lostAcks(id string, acks []Ack, desc *durablev1.DescribeWorkflowResponse) []string {
	type key struct {
		activity string
		attempt  int32
	}
	ended := map[key]string{} // "" completed, else the failure type
	completedAt := map[string]int32{}
	truncated := map[string]int32{}
	record := func(pa *durablev1.PendingActivity, completed bool) {
		if n := pa.GetAttemptsTruncated(); n > 0 {
			truncated[pa.GetActivityId()] = n
		}
		for _, at := range pa.GetAttempts() {
			if at.GetEndedTime() == nil {
				continue
			}
			ended[key{pa.GetActivityId(), at.GetAttempt()}] = at.GetFailure().GetType()
		}
		if completed {
			completedAt[pa.GetActivityId()] = pa.GetAttempt()
		}
	}
	for _, f := range desc.GetFinishedActivities() {
		record(f.GetActivity(), f.GetOutcome() == "completed")
	}
	for _, pa := range desc.GetPendingActivities() {
		record(pa, false)
	}
	var lost []string
	for _, a := range acks {
		if a.WorkflowID != id {
			continue
		}
		if a.Completed {
			if completedAt[a.ActivityID] != a.Attempt {
				lost = append(lost, fmt.Sprintf("%s attempt %d: completion acknowledged to %s, but the activity did not complete with it", a.ActivityID, a.Attempt, a.Worker))
			}
			continue
		}
		got, ok := ended[key{a.ActivityID, a.Attempt}]
		switch {
		case !ok && truncated[a.ActivityID] > 0:
			// The oldest records of a long trail are dropped.
		case !ok:
			lost = append(lost, fmt.Sprintf("%s attempt %d: failure %s acknowledged to %s, but the attempt trail has no end for it", a.ActivityID, a.Attempt, a.FailureType, a.Worker))
		case got != a.FailureType:
			lost = append(lost, fmt.Sprintf("%s attempt %d: failure %s acknowledged to %s, but the attempt ended with %q", a.ActivityID, a.Attempt, a.FailureType, a.Worker, got))
		}
	}
	return lost
}

package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// printFinished writes the activities that finished within the daemon's
// attempt retention as one table, a row per attempt with the activity's
// columns on its first: what each attempt ran on, when, for how long and
// how it ended. last bounds the attempts shown per activity (0: all).
func printFinished(w io.Writer, fins []*durablev1.FinishedActivity, last int, now time.Time) {
	fmt.Fprintln(w, "Finished activities, oldest first:")
	t := table(w)
	row(t, "ACTIVITY", "TYPE", "OUTCOME", "FINISHED", "ATTEMPTS", "#", "WORKER", "STARTED", "TOOK", "RESULT")
	for _, f := range fins {
		a := f.GetActivity()
		trail := a.GetAttempts()
		total := len(trail) + int(a.GetAttemptsTruncated())
		if last > 0 && len(trail) > last {
			trail = trail[len(trail)-last:]
		}
		count := strconv.Itoa(total)
		if len(trail) < total {
			count += fmt.Sprintf(" (last %d)", len(trail))
		}
		head := []string{activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()), outcomeWord(f.GetOutcome()), relative(f.GetFinishedTime().AsTime(), now), count}
		if len(trail) == 0 {
			row(t, append(head, "-", "-", "-", "-", "never started")...)
			continue
		}
		for i, at := range trail {
			if i > 0 {
				head = []string{"", "", "", "", ""}
			}
			took, result := "-", finishedResult(f, at)
			if at.GetEndedTime() != nil && at.GetStartedTime() != nil {
				took = human(at.GetEndedTime().AsTime().Sub(at.GetStartedTime().AsTime()))
			}
			row(t, append(head, strconv.Itoa(int(at.GetAttempt())), dash(activity.EscapeID(at.GetIdentity())), stamp(at.GetStartedTime(), now), took, result)...)
		}
	}
	t.Flush()
}

// outcomeWord is how a finished activity ended, as a table says it.
func outcomeWord(outcome string) string {
	if outcome == "workflow_closed" {
		return "workflow closed"
	}
	return dash(outcome)
}

// finishedResult says how one attempt of a finished activity ended. An
// attempt still open ran when the workflow closed: how it ended is not
// known.
func finishedResult(f *durablev1.FinishedActivity, at *durablev1.AttemptRecord) string {
	switch {
	case at.GetFailure() != nil:
		return cut(failureText(at.GetFailure()), 100)
	case at.GetEndedTime() != nil:
		return "completed"
	case f.GetOutcome() == "workflow_closed":
		return "cut off: the workflow closed"
	}
	return "-"
}

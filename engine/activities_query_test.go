package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// scheduleAll starts workflow wf and completes its first workflow task with
// cmds.
func (h *harness) scheduleAll(wf string, cmds ...*durablev1.Command) {
	h.t.Helper()
	h.start(wf, "Order")
	wt := h.pollWorkflow()
	if wt == nil {
		h.t.Fatalf("%s: no workflow task", wf)
	}
	if _, err := h.e.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		h.t.Fatal(err)
	}
}

func scheduleOn(id, typ, queue string, maxAttempts int32) *durablev1.Command {
	return &durablev1.Command{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: typ,
		ActivityOptions: &durablev1.ActivityOptions{TaskQueue: queue, RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: maxAttempts, InitialMs: 60000}},
	}
}

func (h *harness) pollQueue(queue string, n int32) []*durablev1.ActivityTask {
	h.t.Helper()
	r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "worker-1", MaxTasks: n})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(r.GetTasks()) != int(n) {
		h.t.Fatalf("polled %d tasks of %s, want %d", len(r.GetTasks()), queue, n)
	}
	return r.GetTasks()
}

// listActivities pages through ListActivities with page size n and returns
// "wf/act" of each activity, failing on one seen twice.
func (h *harness) listActivities(req *durablev1.ListActivitiesRequest, n int32) []string {
	h.t.Helper()
	var out []string
	req.PageSize = n
	for pages := 0; ; pages++ {
		if pages > 100 {
			h.t.Fatal("ListActivities does not stop paging")
		}
		resp, err := h.e.ListActivities(context.Background(), req)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(resp.GetActivities()) > int(n) {
			h.t.Fatalf("page of %d, asked for %d", len(resp.GetActivities()), n)
		}
		for _, a := range resp.GetActivities() {
			k := a.GetWorkflowId() + "/" + a.GetActivityId()
			if slices.Contains(out, k) {
				h.t.Fatalf("%s returned twice", k)
			}
			out = append(out, k)
		}
		if len(resp.GetNextPageToken()) == 0 {
			slices.Sort(out)
			return out
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}

// TestActivitiesQueryAcrossWorkflows: activities of many workflows in every
// state; each filter of ListActivities returns exactly the activities it
// names, and paging with small pages returns each of them once.
func TestActivitiesQueryAcrossWorkflows(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleAll("wf-1", scheduleOn("c", "Charge", "pay", 5), scheduleOn("e", "Email", "mail", 5))
	h.scheduleAll("wf-2", scheduleOn("c", "Charge", "pay", 1), scheduleOn("e", "Email", "mail", 5))
	h.scheduleAll("wf-3", scheduleOn("c", "Charge", "pay-eu", 5))
	var reports []string
	for i := range 20 {
		wf := fmt.Sprintf("rep-%02d", i)
		h.scheduleAll(wf, scheduleOn("r", "Report", "reports", 5))
		reports = append(reports, wf+"/r")
	}
	refused := &durablev1.Failure{Type: "Unavailable", Message: "connection refused 10.0.0.7:5432"}
	for _, task := range h.pollQueue("pay", 2) {
		f := refused
		if task.GetWorkflowId() == "wf-2" {
			f = &durablev1.Failure{Type: "Unavailable", Message: "connection refused 10.0.0.9:5432"}
		}
		h.fail(task, f) // wf-1/c retries as attempt 2; wf-2/c dead-letters
	}
	h.pollQueue("mail", 1) // wf-1/e is running
	h.complete(h.pollQueue("reports", 1)[0])
	reports = reports[1:] // rep-00/r completed: no longer listed

	const (
		scheduled = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
		started   = durablev1.ActivityState_ACTIVITY_STATE_STARTED
		retrying  = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
		dead      = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
	)
	every := slices.Sorted(slices.Values(append([]string{"wf-1/c", "wf-1/e", "wf-2/c", "wf-2/e", "wf-3/c"}, reports...)))
	tests := []struct {
		name string
		req  *durablev1.ListActivitiesRequest
		want []string
	}{
		{"Every", &durablev1.ListActivitiesRequest{}, every},
		{"Retrying", &durablev1.ListActivitiesRequest{State: retrying}, []string{"wf-1/c"}},
		{"Running", &durablev1.ListActivitiesRequest{State: started}, []string{"wf-1/e"}},
		{"Scheduled", &durablev1.ListActivitiesRequest{State: scheduled},
			slices.Sorted(slices.Values(append([]string{"wf-2/e", "wf-3/c"}, reports...)))},
		{"DeadLettered", &durablev1.ListActivitiesRequest{State: dead}, []string{"wf-2/c"}},
		{"ActivityType", &durablev1.ListActivitiesRequest{ActivityType: "Charge"}, []string{"wf-1/c", "wf-2/c", "wf-3/c"}},
		{"StateAndType", &durablev1.ListActivitiesRequest{State: scheduled, ActivityType: "Charge"}, []string{"wf-3/c"}},
		{"MinAttempt", &durablev1.ListActivitiesRequest{MinAttempt: 2}, []string{"wf-1/c"}},
		{"FailureType", &durablev1.ListActivitiesRequest{FailureType: "Unavailable"}, []string{"wf-1/c", "wf-2/c"}},
		{"FailureTypeAndState", &durablev1.ListActivitiesRequest{FailureType: "Unavailable", State: dead}, []string{"wf-2/c"}},
		{"Fingerprint", &durablev1.ListActivitiesRequest{FailureFingerprint: activity.Fingerprint(refused)}, []string{"wf-1/c", "wf-2/c"}},
		{"OtherFingerprint", &durablev1.ListActivitiesRequest{FailureFingerprint: activity.Fingerprint(&durablev1.Failure{Type: "Unavailable", Message: "timeout"})}, nil},
		{"TaskQueue", &durablev1.ListActivitiesRequest{TaskQueue: "pay-eu"}, []string{"wf-3/c"}},
		{"NothingOfTheType", &durablev1.ListActivitiesRequest{ActivityType: "Refund"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int32{1, 3, 1000} {
				h := *h
				h.t = t
				req := &durablev1.ListActivitiesRequest{
					State: tt.req.GetState(), MinAttempt: tt.req.GetMinAttempt(), FailureType: tt.req.GetFailureType(),
					FailureFingerprint: tt.req.GetFailureFingerprint(), ActivityType: tt.req.GetActivityType(), TaskQueue: tt.req.GetTaskQueue(),
				}
				if got := h.listActivities(req, size); !slices.Equal(got, tt.want) {
					t.Errorf("pages of %d: got %q, want %q", size, got, tt.want)
				}
			}
		})
	}

	// The retrying activity carries what the filters matched on.
	resp, err := h.e.ListActivities(context.Background(), &durablev1.ListActivitiesRequest{State: retrying})
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.GetActivities()[0]; a.GetAttempt() != 2 || a.GetFailureFingerprint() != activity.Fingerprint(refused) || a.GetNextAttemptTime() == nil {
		t.Errorf("retrying activity = %v", a)
	}

	// A token of another list, or of the same list with another state, is
	// refused rather than read as the start of an empty page.
	dl, err := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.e.ListActivities(context.Background(), &durablev1.ListActivitiesRequest{State: scheduled, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	var inv *engine.InvalidError
	for name, req := range map[string]*durablev1.ListActivitiesRequest{
		"DeadLetterToken": {NextPageToken: dl.GetNextPageToken()},
		"OtherState":      {State: retrying, NextPageToken: first.GetNextPageToken()},
		"Garbage":         {NextPageToken: []byte("garbage")},
	} {
		if _, err := h.e.ListActivities(context.Background(), req); !errors.As(err, &inv) || inv.Field != "next_page_token" {
			t.Errorf("%s: err = %v, want an invalid next_page_token", name, err)
		}
	}
}

// TestListDeadLettersFilters: the fingerprint and the dead-lettered time
// bounds select letters, alone and with the other filters, also across
// pages.
func TestListDeadLettersFilters(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	msgs := []string{"order 8841 not found", "order 17 not found", "order 9 not paid", "order 12 not found"}
	for i, m := range msgs {
		h.scheduleAll(fmt.Sprintf("wf-%d", i), scheduleOn("c", "Charge", "q", 1))
		h.fail(h.pollActivity(), &durablev1.Failure{Type: "NotFound", Message: m})
		h.clock.Advance(time.Hour)
	}
	notFound := activity.Fingerprint(&durablev1.Failure{Type: "NotFound", Message: "order 1 not found"})
	list := func(req *durablev1.ListDeadLettersRequest) []string {
		t.Helper()
		var out []string
		req.PageSize = 1
		for {
			resp, err := h.e.ListDeadLetters(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range resp.GetDeadLetters() {
				out = append(out, a.GetWorkflowId())
			}
			if len(resp.GetNextPageToken()) == 0 {
				return out
			}
			req.NextPageToken = resp.GetNextPageToken()
		}
	}
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	tests := []struct {
		name string
		req  *durablev1.ListDeadLettersRequest
		want []string
	}{
		{"All", &durablev1.ListDeadLettersRequest{}, []string{"wf-0", "wf-1", "wf-2", "wf-3"}},
		{"Fingerprint", &durablev1.ListDeadLettersRequest{FailureFingerprint: notFound}, []string{"wf-0", "wf-1", "wf-3"}},
		{"After", &durablev1.ListDeadLettersRequest{DeadLetteredAfter: at(time.Hour)}, []string{"wf-1", "wf-2", "wf-3"}},
		{"Before", &durablev1.ListDeadLettersRequest{DeadLetteredBefore: at(2 * time.Hour)}, []string{"wf-0", "wf-1"}},
		{"Between", &durablev1.ListDeadLettersRequest{DeadLetteredAfter: at(30 * time.Minute), DeadLetteredBefore: at(150 * time.Minute)}, []string{"wf-1", "wf-2"}},
		{"FingerprintBetween", &durablev1.ListDeadLettersRequest{FailureFingerprint: notFound, DeadLetteredAfter: at(30 * time.Minute), DeadLetteredBefore: at(150 * time.Minute)}, []string{"wf-1"}},
		{"FingerprintAndWorkflow", &durablev1.ListDeadLettersRequest{FailureFingerprint: notFound, WorkflowId: "wf-2"}, nil},
	}
	for _, tt := range tests {
		if got := list(tt.req); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

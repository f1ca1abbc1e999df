package client_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestGroupByFingerprint(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	letter := func(wf, typ, msg string, minute int) *durablev1.PendingActivity {
		f := &durablev1.Failure{Type: typ, Message: msg}
		return &durablev1.PendingActivity{WorkflowId: wf, ActivityId: "1", LastFailure: f, FailureFingerprint: activity.Fingerprint(f),
			DeadLetteredTime: timestamppb.New(base.Add(time.Duration(minute) * time.Minute))}
	}
	old := letter("wf-old", "NotFound", "order 3 not found", 0)
	old.FailureFingerprint = "" // written before fingerprints: computed from the failure
	groups := client.GroupByFingerprint([]*durablev1.PendingActivity{
		letter("wf-a", "NotFound", "order 8841 not found", 5),
		letter("wf-b", "Unavailable", "connection refused 10.0.0.7:5432", 1),
		letter("wf-c", "NotFound", "order 17 not found", 9),
		old,
		letter("wf-d", "NotFound", "order 17 not paid", 2),
		{WorkflowId: "wf-e", ActivityId: "1"}, // no failure: no group
	})
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3: %+v", len(groups), groups)
	}
	g := groups[0]
	if g.Count != 3 || g.FailureType != "NotFound" || g.Message != "order <n> not found" ||
		!g.First.Equal(base) || !g.Last.Equal(base.Add(9*time.Minute)) || g.Example.GetWorkflowId() != "wf-c" {
		t.Errorf("largest group = %+v", g)
	}
	// Groups of one: the one dead-lettered last comes first.
	if groups[1].Message != "order <n> not paid" || groups[2].FailureType != "Unavailable" {
		t.Errorf("smaller groups = %+v, %+v", groups[1], groups[2])
	}
}

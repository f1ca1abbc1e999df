package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// fail reports task as failed with typ and msg.
func (d *driver) fail(task *durablev1.ActivityTask, typ, msg string) {
	d.t.Helper()
	_, err := d.svc.FailActivityTask(d.ctx(), &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker",
		Failure: &durablev1.Failure{Type: typ, Message: msg}})
	if err != nil {
		d.t.Fatalf("fail %s/%s: %v", task.GetWorkflowId(), task.GetActivityId(), err)
	}
}

// complete reports task as completed.
func (d *driver) complete(task *durablev1.ActivityTask) {
	d.t.Helper()
	_, err := d.svc.CompleteActivityTask(d.ctx(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker", Result: []byte(`"ok"`)})
	if err != nil {
		d.t.Fatalf("complete %s/%s: %v", task.GetWorkflowId(), task.GetActivityId(), err)
	}
}

// deadLetterWith starts workflow id whose one activity "1" of type typ
// dead-letters at its first failure, of type failureType with msg.
func (d *driver) deadLetterWith(id, typ, failureType, msg string) {
	d.t.Helper()
	d.start(id, "Checkout")
	d.decide(schedule("1", typ))
	d.fail(d.activity(), failureType, msg)
}

// TestFingerprintGroups: letters whose messages differ only in numbers, ids,
// addresses and quoted values make one group in wf dlq list --group; other
// failure types or other wording make groups of their own; --fingerprint
// lists exactly one group, and the dead-lettered time bounds narrow it.
func TestFingerprintGroups(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "groups")
	refused := []string{
		"dial tcp 10.0.0.7:5432: connect: connection refused",
		"dial tcp 10.0.0.12:5432: connect: connection refused",
		"dial tcp 10.0.3.1:6432: connect: connection refused",
	}
	for i, msg := range refused {
		d.deadLetterWith(fmt.Sprintf("pay-%d", i), "ChargeCard", "Unavailable", msg)
	}
	notFound := []string{`order 8841 not found in "eu-west"`, `order 17 not found in "us-east"`}
	for i, msg := range notFound {
		d.deadLetterWith(fmt.Sprintf("ship-%d", i), "Ship", "NotFound", msg)
	}
	declined := []string{"payment 123e4567-e89b-12d3-a456-426614174000 declined", "payment 9b2f0c1e-0000-4abc-8def-000000000001 declined"}
	for i, msg := range declined {
		d.deadLetterWith(fmt.Sprintf("card-%d", i), "ChargeCard", "Declined", msg)
	}
	d.deadLetterWith("ship-paid", "Ship", "NotFound", "order 17 not paid") // other wording
	d.deadLetterWith("pay-other", "ChargeCard", "Timeout", refused[0])     // other type

	r := wf(t, "--addr", addr, "--json", "dlq", "list", "--group").wantCode(t, exitOK)
	var doc groupsDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("parse groups: %v\n%s", err, r.stdout)
	}
	byMessage := map[string]groupDoc{}
	for _, g := range doc.Groups {
		byMessage[g.FailureType+": "+g.Message] = g
	}
	want := map[string]int{
		"Unavailable: dial tcp <ip>:<n>: connect: connection refused": 3,
		`NotFound: order <n> not found in "…"`:                        2,
		"Declined: payment <uuid> declined":                           2,
		"NotFound: order <n> not paid":                                1,
		"Timeout: dial tcp <ip>:<n>: connect: connection refused":     1,
	}
	if doc.DeadLetters != 9 || len(doc.Groups) != len(want) {
		t.Fatalf("%d letters in %d groups, want 9 in %d:\n%s", doc.DeadLetters, len(doc.Groups), len(want), r.stdout)
	}
	for msg, n := range want {
		if g, ok := byMessage[msg]; !ok || g.Count != n {
			t.Errorf("group %q: %+v, want %d letters", msg, g, n)
		}
	}
	if g := doc.Groups[0]; g.Count != 3 || g.FailureType != "Unavailable" || !strings.HasPrefix(g.ExampleWorkflowID, "pay-") {
		t.Errorf("largest group first: %+v", g)
	}

	big := byMessage["Unavailable: dial tcp <ip>:<n>: connect: connection refused"]
	if big.Fingerprint != activity.Fingerprint(&durablev1.Failure{Type: "Unavailable", Message: refused[2]}) {
		t.Errorf("group fingerprint %s is not the failure's", big.Fingerprint)
	}
	var letters durablev1.ListDeadLettersResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list", "--fingerprint", big.Fingerprint).wantCode(t, exitOK).stdout, &letters)
	var ids []string
	for _, a := range letters.GetDeadLetters() {
		ids = append(ids, a.GetWorkflowId())
		if a.GetFailureFingerprint() != big.Fingerprint {
			t.Errorf("%s carries fingerprint %q, want %s", a.GetWorkflowId(), a.GetFailureFingerprint(), big.Fingerprint)
		}
	}
	if !slices.Equal(ids, []string{"pay-0", "pay-1", "pay-2"}) {
		t.Errorf("--fingerprint lists %v, want pay-0 pay-1 pay-2", ids)
	}

	// Every letter is seconds old: a bound in the future or an hour back
	// tells them apart.
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list", "--fingerprint", big.Fingerprint, "--dead-after", "1h").wantCode(t, exitOK).stdout, &letters)
	if len(letters.GetDeadLetters()) != 3 {
		t.Errorf("--dead-after 1h: %d letters, want 3", len(letters.GetDeadLetters()))
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r = wf(t, "--addr", addr, "--json", "dlq", "list", "--dead-after", future).wantCode(t, exitOK)
	if strings.TrimSpace(r.stdout) != "{\n  \"deadLetters\": []\n}" {
		t.Errorf("--dead-after in the future: %s, want an empty list", r.stdout)
	}
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list", "--dead-before", future, "--dead-after", "1h").wantCode(t, exitOK).stdout, &letters)
	if len(letters.GetDeadLetters()) != 9 {
		t.Errorf("--dead-after 1h --dead-before +1h: %d letters, want 9", len(letters.GetDeadLetters()))
	}

	table := wf(t, "--addr", addr, "dlq", "list", "--group").wantCode(t, exitOK).stdout
	mustContain(t, table, "FINGERPRINT", "COUNT", big.Fingerprint, "dial tcp <ip>:<n>: connect: connection refused",
		"9 dead letters in 5 groups")
}

func TestDLQListFilterUsage(t *testing.T) {
	t.Parallel()
	addr, _ := setup(t)
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"BadDeadAfter", []string{"dlq", "list", "--dead-after", "soon"}, "-dead-after"},
		{"NegativeDeadBefore", []string{"dlq", "list", "--dead-before", "-1h"}, "positive"},
		{"EmptyRange", []string{"dlq", "list", "--dead-after", "1h", "--dead-before", "2h"}, "--dead-before must be later"},
		{"BadFingerprint", []string{"dlq", "list", "--fingerprint", "3f2a"}, "--fingerprint 3f2a: a fingerprint is 12 lower-case hex digits"},
		{"BadWord", []string{"dlq", "list", "--select", "type:Timeout colour:red"}, `"colour:red": unknown key colour:`},
		{"FlagAndWordDisagree", []string{"dlq", "list", "--select", "type:Timeout", "--failure-type", "HeartbeatTimeout"}, "--failure-type HeartbeatTimeout: type: is already type:Timeout"},
		{"NoStateButDead", []string{"dlq", "list", "--select", "state:running"}, "dead letters are all state:dead"},
		{"RedriveFingerprintWithoutAll", []string{"dlq", "redrive", "a", "1", "--fingerprint", "0123456789ab"}, "--all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mustContain(t, wf(t, append([]string{"--addr", addr}, tt.args...)...).wantCode(t, exitUsage).stderr, tt.err)
		})
	}
}

// TestActivitiesCommand: wf activities lists activities of several
// workflows by state and the other filters, as a table and as JSON.
func TestActivitiesCommand(t *testing.T) {
	t.Parallel()
	// No jitter: the retry below is due in exactly an hour, so the table
	// says "retry in" however long the test takes (a full-jitter draw may
	// come out at a few milliseconds).
	addr := testdaemon.Start(t, engine.Options{Jitter: func(d time.Duration) time.Duration { return d }})
	c := dial(t, addr)
	d := newDriver(t, c, "acts")
	retry := func(id, typ string) *durablev1.Command {
		cmd := schedule(id, typ)
		cmd.ActivityOptions.RetryPolicy = &durablev1.RetryPolicy{MaxAttempts: 5, InitialMs: 3600000}
		return cmd
	}
	d.deadLetterWith("acts-2", "ChargeCard", "Unavailable", "connection refused 10.0.0.7:5432")
	d.start("acts-1", "Checkout")
	d.decide(retry("charge", "ChargeCard"), retry("mail", "SendEmail"))
	for range 2 {
		task := d.activity()
		if task.GetActivityId() == "charge" {
			d.fail(task, "Unavailable", "connection refused 10.0.0.9:5432") // retrying, attempt 2 due in an hour
		}
		// mail stays leased: running
	}

	var doc struct {
		Activities []json.RawMessage `json:"activities"`
	}
	list := func(args ...string) []string {
		t.Helper()
		r := wf(t, append([]string{"--addr", addr, "--json", "activities"}, args...)...).wantCode(t, exitOK)
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Activities == nil {
			t.Fatalf("parse activities: %v\n%s", err, r.stdout)
		}
		var out []string
		for _, raw := range doc.Activities {
			var a durablev1.PendingActivity
			unmarshal(t, string(raw), &a)
			out = append(out, a.GetWorkflowId()+"/"+a.GetActivityId())
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"All", nil, []string{"acts-1/charge", "acts-1/mail", "acts-2/1"}},
		{"Retrying", []string{"--state", "retrying"}, []string{"acts-1/charge"}},
		{"Running", []string{"--state", "running"}, []string{"acts-1/mail"}},
		{"DeadLettered", []string{"--state", "dead-lettered"}, []string{"acts-2/1"}},
		{"Scheduled", []string{"--state", "scheduled"}, nil},
		{"MinAttempt", []string{"--min-attempt", "2"}, []string{"acts-1/charge"}},
		{"FailureType", []string{"--failure-type", "Unavailable"}, []string{"acts-1/charge", "acts-2/1"}},
		{"Fingerprint", []string{"--fingerprint", activity.Fingerprint(&durablev1.Failure{Type: "Unavailable", Message: "connection refused 1.2.3.4:1"})},
			[]string{"acts-1/charge", "acts-2/1"}},
		{"ActivityType", []string{"--activity-type", "SendEmail"}, []string{"acts-1/mail"}},
		{"TaskQueue", []string{"--task-queue", "elsewhere"}, nil},
	}
	for _, tt := range tests {
		if got := list(tt.args...); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	out := wf(t, "--addr", addr, "activities", "--state", "retrying").wantCode(t, exitOK).stdout
	mustContain(t, out, "WORKFLOW", "acts-1", "charge", "ChargeCard", "retrying", "2/5", "retry in", "Unavailable: connection refused 10.0.0.9:5432", "1 activity")
	// The initial backoff of an hour is held to the default max interval of
	// a minute, and the jitter is off: the retry is due in at most a minute.
	mustContain(t, wf(t, "--addr", addr, "describe", "acts-1").wantCode(t, exitOK).stdout,
		"  schedule: attempt 2 at +", " · attempt 3 at ~+", " · gives up after attempt 5",
		"  schedule: if attempt 1 fails: · attempt 2 at ~+1m00s · attempt 3 at ~+2m00s · attempt 4 at ~+3m00s · attempt 5 at ~+4m00s · gives up after attempt 5")
	mustContain(t, wf(t, "--addr", addr, "activities", "--state", "scheduled").wantCode(t, exitOK).stdout, "No pending activities match.")
	mustContain(t, wf(t, "--addr", addr, "activities", "--state", "sleeping").wantCode(t, exitUsage).stderr, "--state")
	mustContain(t, wf(t, "--addr", addr, "activities", "--min-attempt", "-1").wantCode(t, exitUsage).stderr, "--min-attempt")
	mustContain(t, wf(t, "activities", "--help").wantCode(t, exitOK).stdout, "Examples:", "--state", "--fingerprint")
}

// TestDescribeShowsFinishedAttempts: an activity that failed twice and then
// completed is described, after it finished, with all three attempts.
func TestDescribeShowsFinishedAttempts(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "trail")
	cmd := schedule("1", "ChargeCard")
	cmd.ActivityOptions.RetryPolicy = &durablev1.RetryPolicy{MaxAttempts: 5, InitialMs: 1, MaxIntervalMs: 1}
	cmd.ActivityOptions.StartToCloseTimeout = durationpb.New(time.Minute)
	d.start("trail-1", "Checkout")
	d.decide(cmd)
	d.fail(d.activity(), "Unavailable", "dial tcp 10.0.0.7:5432: connect: connection refused")
	d.fail(d.activity(), "Unavailable", "dial tcp 10.0.0.8:5432: connect: connection refused")
	d.complete(d.activity())

	out := wf(t, "--addr", addr, "describe", "trail-1").wantCode(t, exitOK).stdout
	mustContain(t, out, "No pending activities.", "Finished activities, oldest first:", "OUTCOME", "completed",
		"10.0.0.7:5432", "10.0.0.8:5432", "test-worker")
	var resp durablev1.DescribeWorkflowResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "describe", "trail-1").wantCode(t, exitOK).stdout, &resp)
	fins := resp.GetFinishedActivities()
	if len(fins) != 1 || fins[0].GetOutcome() != "completed" || len(fins[0].GetActivity().GetAttempts()) != 3 {
		t.Fatalf("finished activities = %v", fins)
	}
	if f := fins[0].GetActivity().GetAttempts()[1].GetFailure(); f.GetMessage() != "dial tcp 10.0.0.8:5432: connect: connection refused" {
		t.Errorf("second attempt failure = %v", f)
	}
	// --attempts bounds the rows per activity, and says how many there were.
	mustContain(t, wf(t, "--addr", addr, "describe", "trail-1", "--attempts", "1").wantCode(t, exitOK).stdout, "3 (last 1)")
}

// TestPrintFinished: the finished table gives each attempt a row, says how
// a running attempt that its workflow's close cut off ended, and how many
// attempts --attempts left out.
func TestPrintFinished(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	fins := []*durablev1.FinishedActivity{
		{Outcome: "completed", FinishedTime: at(-time.Minute), Activity: &durablev1.PendingActivity{ActivityId: "1", ActivityType: "Charge",
			AttemptsTruncated: 2, Attempts: []*durablev1.AttemptRecord{
				{Attempt: 3, Identity: "w-1", StartedTime: at(-3 * time.Minute), EndedTime: at(-3*time.Minute + 300*time.Millisecond), Failure: &durablev1.Failure{Type: "Unavailable", Message: "db down"}},
				{Attempt: 4, Identity: "w-2", StartedTime: at(-2 * time.Minute), EndedTime: at(-time.Minute)},
			}}},
		{Outcome: "workflow_closed", FinishedTime: at(-time.Second), Activity: &durablev1.PendingActivity{ActivityId: "2", ActivityType: "Ship",
			Attempts: []*durablev1.AttemptRecord{{Attempt: 1, Identity: "w-3", StartedTime: at(-10 * time.Second)}}}},
		{Outcome: "workflow_closed", FinishedTime: at(-time.Second), Activity: &durablev1.PendingActivity{ActivityId: "3", ActivityType: "Mail"}},
	}
	var b strings.Builder
	printFinished(&b, fins, 1, now)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want a title, a header and one row per activity (--attempts 1):\n%s", len(lines), out)
	}
	for i, want := range [][]string{
		{"1", "Charge", "completed", "1m00s ago", "4 (last 1)", "4", "w-2", "1m00s", "completed"},
		{"2", "Ship", "workflow closed", "1s ago", "1", "w-3", "-", "cut off: the workflow closed"},
		{"3", "Mail", "workflow closed", "0", "never started"},
	} {
		mustContain(t, lines[2+i], want...)
	}
	b.Reset()
	printFinished(&b, fins[:1], 0, now)
	mustContain(t, b.String(), "Unavailable: db down", "300ms", "4 ")
}

package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestParseSelectionReadsEveryWordAndPrintsItBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, canonical string
		want                Selection
	}{
		{name: "Empty", in: "  ", canonical: "", want: Selection{}},
		{name: "EveryKey",
			in:        "type:Timeout fp:3f2a9c1b7d4e act:ChargeCard wf:order-* queue:payments state:dead attempt>=3 nopoller",
			canonical: "type:Timeout fp:3f2a9c1b7d4e act:ChargeCard wf:order-* queue:payments state:dead attempt>=3 nopoller",
			want: Selection{FailureType: "Timeout", Fingerprint: "3f2a9c1b7d4e", ActivityType: "ChargeCard", WorkflowPrefix: "order-",
				TaskQueue: "payments", State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, MinAttempt: 3, NoPoller: true}},
		{name: "OrderDoesNotMatter", in: "attempt>=2 act:Ship type:Timeout", canonical: "type:Timeout act:Ship attempt>=2",
			want: Selection{FailureType: "Timeout", ActivityType: "Ship", MinAttempt: 2}},
		{name: "LongKeysAreAliases", in: "failure:Timeout activity:Ship workflow:order-42 fingerprint:000000000000 task-queue:q state:dead-lettered",
			canonical: "type:Timeout fp:000000000000 act:Ship wf:order-42 queue:q state:dead",
			want: Selection{FailureType: "Timeout", Fingerprint: "000000000000", ActivityType: "Ship", WorkflowID: "order-42", TaskQueue: "q",
				State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED}},
		{name: "OldFailKey", in: "fail:Timeout", canonical: "type:Timeout", want: Selection{FailureType: "Timeout"}},
		{name: "WorkflowExact", in: "wf:order-42", canonical: "wf:order-42", want: Selection{WorkflowID: "order-42"}},
		{name: "FreeTextIsLowerCased", in: "Order 42", canonical: "order 42", want: Selection{Text: []string{"order", "42"}}},
		{name: "RunningIsStarted", in: "state:started", canonical: "state:running", want: Selection{State: durablev1.ActivityState_ACTIVITY_STATE_STARTED}},
		{name: "DeadLetteredBounds", in: "dead<2026-12-01T07:00:00+01:00 dead>=2026-12-01T05:00:00Z",
			canonical: "dead>=2026-12-01T05:00:00Z dead<2026-12-01T06:00:00Z",
			want:      Selection{DeadAfter: time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC), DeadBefore: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)}},
		{name: "QuotedValues", in: `wf:"night batch"* act:"Charge Card" "two words"`,
			canonical: `act:"Charge Card" wf:"night batch"* "two words"`,
			want:      Selection{ActivityType: "Charge Card", WorkflowPrefix: "night batch", Text: []string{"two words"}}},
		{name: "TheSameWordTwiceIsOne", in: "type:Timeout type:Timeout wf:a-* wf:a-* state:dead state:dead-lettered attempt>=2 attempt>=2",
			canonical: "type:Timeout wf:a-* state:dead attempt>=2",
			want:      Selection{FailureType: "Timeout", WorkflowPrefix: "a-", State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, MinAttempt: 2}},
		{name: "ValueKeepsItsColons", in: "type:net:Refused", canonical: "type:net:Refused", want: Selection{FailureType: "net:Refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSelection(tc.in)
			if err != nil {
				t.Fatalf("ParseSelection(%q): %v", tc.in, err)
			}
			if got.String() != tc.canonical {
				t.Errorf("String() = %q, want %q", got.String(), tc.canonical)
			}
			if got.String() != tc.want.String() {
				t.Errorf("ParseSelection(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			back, err := ParseSelection(got.String())
			if err != nil || back.String() != got.String() {
				t.Errorf("String() does not read back: %q → %q, %v", got.String(), back.String(), err)
			}
		})
	}
}

func TestParseSelectionNamesTheBadWord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, word, reason string }{
		{"UnknownKey", "type:Timeout colour:red", "colour:red", "unknown key colour:"},
		{"EmptyValue", "act:", "act:", "needs a value"},
		{"TwoTypes", "type:Timeout type:HeartbeatTimeout", "type:HeartbeatTimeout", "already type:Timeout"},
		{"TwoWorkflows", "wf:a wf:b*", "wf:b*", "already"},
		{"StarOutsideWorkflow", "type:Time*", "type:Time*", "only wf: takes a trailing *"},
		{"BareStar", "wf:*", "wf:*", "a prefix followed by one *"},
		{"ShortFingerprint", "fp:3f2a9c01", "fp:3f2a9c01", "12 lower-case hex digits"},
		{"BadState", "state:sleeping", "state:sleeping", "want state:scheduled"},
		{"TwoStates", "state:dead state:running", "state:running", "already state:dead"},
		{"TwoAttempts", "attempt>=2 attempt>=3", "attempt>=3", "given twice"},
		{"BadAttempt", "attempt>=x", "attempt>=x", "attempt>=N"},
		{"ZeroAttempt", "attempt>=0", "attempt>=0", "attempt>=N"},
		{"OtherComparison", "attempt<3", "attempt<3", "only at-least"},
		{"BadTime", "dead>=yesterday", "dead>=yesterday", "RFC 3339"},
		{"EmptyWindow", "dead>=2026-12-01T06:00:00Z dead<2026-12-01T06:00:00Z", "dead<2026-12-01T06:00:00Z", "later than"},
		{"OpenQuote", `wf:"night`, `"night`, "does not end"},
		{"ControlCharacter", "wf:a\x07b", "wf:a\x07b", "must not contain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSelection(tc.in)
			var se *SelectionError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSelection(%q) = %v, want a *SelectionError", tc.in, err)
			}
			if se.Word != tc.word || !strings.Contains(se.Reason, tc.reason) {
				t.Errorf("error = word %q reason %q, want word %q reason with %q", se.Word, se.Reason, tc.word, tc.reason)
			}
		})
	}
}

func letter(wf, id, actType, failType string) *durablev1.PendingActivity {
	return &durablev1.PendingActivity{
		WorkflowId: wf, ActivityId: id, ActivityType: actType, TaskQueue: "payments",
		State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, Attempt: 5,
		LastFailure: &durablev1.Failure{Type: failType, Message: "no answer"},
	}
}

func TestSelectionMatches(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	timeout := letter("order-1", "3", "ChargeCard", "Timeout")
	heartbeat := letter("order-10", "1", "Ship", "HeartbeatTimeout")
	waiting := &durablev1.PendingActivity{WorkflowId: "refund-7", ActivityId: "2", ActivityType: "Refund", TaskQueue: "refunds",
		State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, Attempt: 1, ScheduledTime: timestamppb.New(now.Add(-5 * time.Second))}
	fresh := &durablev1.PendingActivity{WorkflowId: "refund-8", ActivityId: "2", ActivityType: "Refund", TaskQueue: "refunds",
		State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, Attempt: 1, ScheduledTime: timestamppb.New(now.Add(-time.Second))}
	backingOff := &durablev1.PendingActivity{WorkflowId: "refund-9", ActivityId: "2", ActivityType: "Refund", TaskQueue: "refunds",
		State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, Attempt: 3, ScheduledTime: timestamppb.New(now.Add(-time.Minute)),
		NextAttemptTime: timestamppb.New(now.Add(time.Second))}
	all := []*durablev1.PendingActivity{timeout, heartbeat, waiting, fresh, backingOff}
	for _, tc := range []struct {
		sel  string
		want []*durablev1.PendingActivity
	}{
		{"", all},
		{"type:Timeout", []*durablev1.PendingActivity{timeout}},
		{"type:HeartbeatTimeout", []*durablev1.PendingActivity{heartbeat}},
		{"type:timeout", nil},
		{"fp:" + activity.Fingerprint(heartbeat.GetLastFailure()), []*durablev1.PendingActivity{heartbeat}},
		{"act:Refund state:scheduled", []*durablev1.PendingActivity{waiting, fresh}},
		{"wf:order-1", []*durablev1.PendingActivity{timeout}},
		{"wf:order-1*", []*durablev1.PendingActivity{timeout, heartbeat}},
		{"queue:refunds attempt>=3", []*durablev1.PendingActivity{backingOff}},
		{"nopoller", []*durablev1.PendingActivity{waiting}},
		{"ORDER-1", []*durablev1.PendingActivity{timeout, heartbeat}},
		{"timeout", nil}, // free text looks at ids and types, not failures
		{"ship", []*durablev1.PendingActivity{heartbeat}},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSelection(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []*durablev1.PendingActivity
			for _, a := range all {
				if s.MatchesAt(a, now) {
					got = append(got, a)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%q matched %d, want %d", tc.sel, len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%q matched %s/%s, want %s/%s", tc.sel, got[i].GetWorkflowId(), got[i].GetActivityId(),
						tc.want[i].GetWorkflowId(), tc.want[i].GetActivityId())
				}
			}
		})
	}
}

func TestSelectionToDaemonQueries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sel               string
		dlq               *durablev1.DeadLetterFilter
		dlqExact          bool
		list              *durablev1.ListActivitiesRequest
		listExact         bool
		deadLettersRefuse bool
	}{
		{sel: "type:Timeout", dlq: &durablev1.DeadLetterFilter{FailureType: "Timeout"}, dlqExact: true,
			list: &durablev1.ListActivitiesRequest{FailureType: "Timeout"}, listExact: true},
		{sel: "type:Timeout fp:0123456789ab act:A wf:w", dlq: &durablev1.DeadLetterFilter{FailureType: "Timeout", FailureFingerprint: "0123456789ab",
			ActivityType: "A", WorkflowId: "w"}, dlqExact: true,
			list: &durablev1.ListActivitiesRequest{FailureType: "Timeout", FailureFingerprint: "0123456789ab", ActivityType: "A"}},
		{sel: "wf:order-* type:Timeout", dlq: &durablev1.DeadLetterFilter{FailureType: "Timeout"},
			list: &durablev1.ListActivitiesRequest{FailureType: "Timeout"}},
		{sel: "queue:q attempt>=3 state:dead", dlq: &durablev1.DeadLetterFilter{},
			list:      &durablev1.ListActivitiesRequest{TaskQueue: "q", MinAttempt: 3, State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED},
			listExact: true},
		{sel: "order", dlq: &durablev1.DeadLetterFilter{}, list: &durablev1.ListActivitiesRequest{}},
		{sel: "state:running", deadLettersRefuse: true},
		{sel: "nopoller", deadLettersRefuse: true},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSelection(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ForDeadLetters(); (err != nil) != tc.deadLettersRefuse {
				t.Fatalf("ForDeadLetters() = %v, want refused %v", err, tc.deadLettersRefuse)
			}
			if tc.deadLettersRefuse {
				return
			}
			f, exact := s.DeadLetterFilter()
			if f.String() != tc.dlq.String() || exact != tc.dlqExact {
				t.Errorf("DeadLetterFilter() = {%v} exact %v, want {%v} exact %v", f, exact, tc.dlq, tc.dlqExact)
			}
			r, exact := s.ListActivitiesRequest()
			if r.String() != tc.list.String() || exact != tc.listExact {
				t.Errorf("ListActivitiesRequest() = {%v} exact %v, want {%v} exact %v", r, exact, tc.list, tc.listExact)
			}
		})
	}
}

func TestSelectionOfFilterReadsBackTheSameWords(t *testing.T) {
	t.Parallel()
	s := SelectionOfFilter(&durablev1.DeadLetterFilter{FailureType: "Timeout", WorkflowId: "order-42"})
	if got := s.String(); got != "type:Timeout wf:order-42" {
		t.Errorf("SelectionOfFilter = %q", got)
	}
	f, exact := s.DeadLetterFilter()
	if !exact || f.GetFailureType() != "Timeout" || f.GetWorkflowId() != "order-42" {
		t.Errorf("round trip = {%v} exact %v", f, exact)
	}
}

// TestNoPollerOnTheDaemonsQueues: with the daemon's task queues, nopoller
// is its rule (due, and no worker polls the queue for activities), not the
// wait alone.
func TestNoPollerOnTheDaemonsQueues(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	due := func(queue string, ago time.Duration) *durablev1.PendingActivity {
		return &durablev1.PendingActivity{WorkflowId: "w-" + queue, ActivityId: "1", TaskQueue: queue,
			State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, NextAttemptTime: timestamppb.New(now.Add(-ago))}
	}
	queues := []*durablev1.TaskQueue{
		{Name: "polled", Pollers: []*durablev1.Poller{{Identity: "w1", Kind: durablev1.TaskKind_TASK_KIND_ACTIVITY}}},
		{Name: "workflows-only", Pollers: []*durablev1.Poller{{Identity: "w2", Kind: durablev1.TaskKind_TASK_KIND_WORKFLOW}}},
	}
	sel := Selection{NoPoller: true}
	for _, tc := range []struct {
		a    *durablev1.PendingActivity
		want bool
	}{
		{due("polled", time.Minute), false},                 // a worker polls: busy, not missing
		{due("workflows-only", 100*time.Millisecond), true}, // nobody polls for activities, however fresh
		{due("unknown", 100*time.Millisecond), true},        // a queue the daemon does not list has no poller
		{due("unknown", -time.Second), false},               // still backing off
	} {
		if got := sel.MatchesOnQueues(tc.a, now, queues); got != tc.want {
			t.Errorf("nopoller on %s = %v, want %v", tc.a.GetTaskQueue(), got, tc.want)
		}
	}
}

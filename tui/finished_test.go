package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// TestDetailShowsHowAnOpenActivityFinished: the activity in the detail
// pane completes; the pane asks the daemon how it finished and shows every
// attempt, the winning one included, instead of the last state it saw.
func TestDetailShowsHowAnOpenActivityFinished(t *testing.T) {
	t.Parallel()
	fake := fixtureBackend()
	fake.live = make(chan *durablev1.WatchEvent)
	charge := proto.Clone(fixtureActivities()[0]).(*durablev1.PendingActivity)
	charge.Attempts = append(charge.Attempts, &durablev1.AttemptRecord{
		Attempt: 3, Identity: "worker-c", StartedTime: at(-2 * time.Second), EndedTime: at(-1500 * time.Millisecond),
	})
	fake.finished = map[string][]*durablev1.FinishedActivity{"order-1001": {{Activity: charge, Outcome: "completed", FinishedTime: at(-1500 * time.Millisecond)}}}
	tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(132, 43))
	waitFor(t, tm, "order-1001")
	for _, k := range keys("j", "j", "j", "j", "enter") {
		tm.Send(k)
	}
	waitFor(t, tm, "events in history")

	fake.live <- &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE,
		Removed: []*durablev1.ActivityRef{{WorkflowId: "order-1001", ActivityId: "1"}}}
	waitFor(t, tm, "finished: completed")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	view := ansi.Strip(final.View())
	for _, want := range []string{
		"order-1001 / 1 ChargeCard  (finished: completed",
		"completed · after attempt 3 of 5",
		"#1 worker-a · started 8.0s ago · ran 0.1s · CardDeclined: issuer timed out",
		"#3 worker-c · started 2.0s ago · ran 0.5s · completed",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("detail lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, "schedule ") || strings.Contains(view, "next try") {
		t.Errorf("a finished activity still shows what is due next:\n%s", view)
	}
}

package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestIdsFromAnOlderStoreShowEscaped: ids written before the daemon refused
// invisible characters reach the console escaped, so a right-to-left
// override cannot make "invoice-\u202efdp.exe" read as "invoice-exe.pdf".
func TestIdsFromAnOlderStoreShowEscaped(t *testing.T) {
	t.Parallel()
	const id = "invoice-\u202Efdp.exe"
	a := act(id, "1\u200B", "Charge\u2067", stRetrying, 2, 5)
	a.TaskQueue = "q\uFEFF"
	a.LastWorkerIdentity = "host\u200D:1"
	a.LastFailure = fail("Card\u00ADDeclined", "no")
	wf := &durablev1.WorkflowInfo{WorkflowId: id, WorkflowType: "Pay\u200Bment", TaskQueue: "q\uFEFF",
		Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, StartTime: at(-time.Minute), PendingActivities: 1}
	fake := &fakeBackend{scripts: []script{{events: snapshot([]*durablev1.PendingActivity{a}, []*durablev1.WorkflowInfo{wf})}}}
	tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(160, 43))
	waitFor(t, tm, `invoice-\u202efdp.exe`)
	for _, k := range keys("enter") {
		tm.Send(k)
	}
	waitFor(t, tm, "last worker")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	view := ansi.Strip(tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model).View())
	for _, want := range []string{`invoice-\u202efdp.exe`, `1\u200b`, `Charge\u2067`, `q\ufeff`, `host\u200d:1`, `Card\u00adDeclined`} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %s:\n%s", want, view)
		}
	}
	if strings.ContainsAny(view, "\u202E\u200B\u2067\uFEFF\u200D\u00AD") {
		t.Errorf("view shows an invisible character raw:\n%s", view)
	}
}

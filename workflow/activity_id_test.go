package workflow_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// TestChosenActivityIDs: an activity id the workflow chooses is used as
// given; one with '/' or one already used is refused before anything is sent,
// with an error the workflow sees at Get; generated ids skip the ones chosen.
func TestChosenActivityIDs(t *testing.T) {
	t.Parallel()
	run := func(ids ...string) func(ctx workflow.Context) error {
		return func(ctx workflow.Context) error {
			var errs []error
			for _, id := range ids {
				c := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{ActivityID: id})
				f := workflow.ExecuteActivity(c, "A", nil)
				if f.IsReady() {
					errs = append(errs, f.Get(ctx, nil))
				}
			}
			return errors.Join(errs...)
		}
	}
	tests := []struct {
		name    string
		ids     []string
		wantIDs []string
		refused string // what the failure says, "" when nothing is refused
	}{
		{"Chosen", []string{"charge-card"}, []string{"charge-card"}, ""},
		{"GeneratedSkipChosen", []string{"1", "", ""}, []string{"1", "2", "3"}, ""},
		{"ChosenAfterGenerated", []string{"", "", "7"}, []string{"1", "2", "7"}, ""},
		{"Slash", []string{"a/b"}, nil, `bad activity id "a/b": it must not contain '/'`},
		{"Duplicate", []string{"x", "x"}, []string{"x"}, `bad activity id "x": the workflow already scheduled`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := execute(t, run(tc.ids...), concat(started(""), taskDone()[0]))
			var ids []string
			var closing *durablev1.Command
			for _, c := range res.Commands {
				switch c.GetType() {
				case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
					ids = append(ids, c.GetActivityId())
				case durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW, durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW:
					closing = c
				}
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("scheduled ids %v, want %v", ids, tc.wantIDs)
			}
			failed := closing.GetType() == durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW
			if failed != (tc.refused != "") {
				t.Fatalf("closing command = %v, want the workflow failed: %v", closing, tc.refused != "")
			}
			if f := closing.GetFailure(); failed && (f.GetType() != activity.TypeError || !strings.Contains(f.GetMessage(), tc.refused)) {
				t.Errorf("failure = %v, want an Error saying %q", f, tc.refused)
			}
		})
	}
}

package tui

import (
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// filter is what the user typed after `/`. Words are ANDed; a word may name
// its field (wf:, type:, fail:) or match any of workflow id, activity id and
// type, failure type and message, state. Matching ignores case.
type filter struct {
	text  string
	terms []filterTerm
}

type filterTerm struct {
	field string // "", "wf", "type", "fail"
	value string
}

func parseFilter(s string) filter {
	f := filter{text: strings.TrimSpace(s)}
	for _, w := range strings.Fields(strings.ToLower(s)) {
		t := filterTerm{value: w}
		if k, v, ok := strings.Cut(w, ":"); ok {
			switch k {
			case "wf", "workflow":
				t = filterTerm{field: "wf", value: v}
			case "type", "activity":
				t = filterTerm{field: "type", value: v}
			case "fail", "failure":
				t = filterTerm{field: "fail", value: v}
			}
		}
		f.terms = append(f.terms, t)
	}
	return f
}

func (f filter) empty() bool { return len(f.terms) == 0 }

func contains(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}

func (f filter) matchActivity(a *durablev1.PendingActivity) bool {
	for _, t := range f.terms {
		var ok bool
		switch t.field {
		case "wf":
			ok = contains(a.GetWorkflowId(), t.value)
		case "type":
			ok = contains(a.GetActivityType(), t.value)
		case "fail":
			ok = contains(a.GetLastFailure().GetType(), t.value)
		default:
			ok = contains(a.GetWorkflowId(), t.value) || contains(a.GetActivityId(), t.value) ||
				contains(a.GetActivityType(), t.value) || contains(a.GetLastFailure().GetType(), t.value) ||
				contains(a.GetLastFailure().GetMessage(), t.value) || contains(stateName(a.GetState()), t.value)
		}
		if !ok {
			return false
		}
	}
	return true
}

func (f filter) matchWorkflow(w *durablev1.WorkflowInfo) bool {
	for _, t := range f.terms {
		var ok bool
		switch t.field {
		case "wf":
			ok = contains(w.GetWorkflowId(), t.value)
		case "type":
			ok = contains(w.GetWorkflowType(), t.value)
		case "fail":
			ok = contains(w.GetFailure().GetType(), t.value)
		default:
			ok = contains(w.GetWorkflowId(), t.value) || contains(w.GetWorkflowType(), t.value) ||
				contains(w.GetFailure().GetType(), t.value) || contains(w.GetFailure().GetMessage(), t.value) ||
				contains(statusName(w.GetStatus()), t.value)
		}
		if !ok {
			return false
		}
	}
	return true
}

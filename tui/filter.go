package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// filter is what the user typed after `/`, read as a client.Selection: the
// words mean here what they mean to wf --select, so a group, a filter and a
// redrive select the same letters in both.
type filter struct {
	// text is what was typed, for editing it again.
	text string
	sel  client.Selection
}

// parseFilter reads text for the list c. An error names the word that
// could not be read, or one that selects nothing there.
func parseFilter(text string, c filtered) (filter, error) {
	sel, err := client.ParseSelection(text)
	if err == nil {
		err = c.Validate(filter{text: text, sel: sel})
	}
	if err != nil {
		return filter{}, err
	}
	return filter{text: text, sel: sel}, nil
}

func (f filter) empty() bool { return f.sel.IsZero() }

// canonical is the filter in the words the daemon and wf read it by.
func (f filter) canonical() string { return f.sel.String() }

// matchActivity reports whether a passes the filter at now. With the
// daemon's task queues known, nopoller is the daemon's rule (due, and no
// worker polls its queue), as wf applies it; without them, due for more than
// client.NoPollerAfter and not taken. A stalled workflow-task row has a row
// only because nobody polls its queue for workflow tasks, which the rule for
// activities would not see: it keeps the rule of the time.
func (f filter) matchActivity(a *durablev1.PendingActivity, now time.Time, q *queues) bool {
	if q == nil || !q.known || isWorkflowTask(a) {
		return f.sel.MatchesAt(a, now)
	}
	return f.sel.MatchesOnQueues(a, now, q.list)
}

func (f filter) matchWorkflow(w *durablev1.WorkflowInfo) bool {
	return f.sel.MatchesWorkflow(w)
}

// filterBarView is the status line while a filter is typed: the input, and
// under it what it was read as and how many rows it shows, or the word that
// could not be read.
func (m Model) filterBarView() string {
	st := m.styles
	under := st.Muted.Render("type words: type:Timeout act:ChargeCard wf:order-* attempt>=3 · ? explains")
	switch {
	case m.filterErr != "":
		under = st.Warning.Render("✗ " + m.filterErr)
	case m.filterText() != "":
		under = st.Filter.Render(fmt.Sprintf("= %s · %s shown", m.filterCanonical(), thousands(m.listLen())))
	}
	return ansi.Truncate(m.input.View(), m.width, "…") + "\n" + ansi.Truncate(under, m.width, "…")
}

// filterLine is the status line of a filter in force.
func (m Model) filterLine() string {
	return fmt.Sprintf("filter %s — %s shown · esc clears", m.filterCanonical(), thousands(m.listLen()))
}

// clockMoved gives the lists the new time, and rebuilds a list whose filter
// depends on it (nopoller): an activity becomes stuck with no event saying
// so.
func (m Model) clockMoved() Model {
	m.st.now = m.now
	if f := m.st.attempts.filter; f.sel.NoPoller {
		m.st.refilterActivities(false, f)
		return m.clamp(screenAttempts)
	}
	return m
}

// selectionHelp is what ? says about the words of the filter bar.
func (m Model) selectionHelp() string {
	st := m.styles
	lines := []string{
		st.Help.Bold(true).Render("/ filter words") + st.Help.Render(" — ANDed; each matches exactly; the same words as wf --select"),
		st.Help.Render("type:FAILURE  fp:FINGERPRINT  act:ACTIVITY  wf:ID  wf:PREFIX*  queue:QUEUE"),
		st.Help.Render("state:scheduled|running|retrying|dead  attempt>=N  nopoller  dead>=T  dead<T"),
		st.Help.Render("any other word: text in a workflow id, activity id or type (to look, not to act)"),
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, m.width, "…")
	}
	return strings.Join(lines, "\n")
}

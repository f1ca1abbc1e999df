package tui

import (
	"github.com/charmbracelet/lipgloss"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Styles is every look of the console, built once by NewStyles. Colour is
// decoration only: selection, state and warnings are also readable on a
// terminal without colour (a "›" marker, words, brackets).
type Styles struct {
	Title      lipgloss.Style
	Tab        lipgloss.Style
	ActiveTab  lipgloss.Style
	Status     lipgloss.Style
	Header     lipgloss.Style
	Row        lipgloss.Style
	Selected   lipgloss.Style
	Muted      lipgloss.Style
	Label      lipgloss.Style
	Warning    lipgloss.Style
	Banner     lipgloss.Style
	Progress   lipgloss.Style
	Dialog     lipgloss.Style
	DialogText lipgloss.Style
	Filter     lipgloss.Style
	Help       lipgloss.Style
	Scheduled  lipgloss.Style
	Running    lipgloss.Style
	Retrying   lipgloss.Style
	Dead       lipgloss.Style
	Completed  lipgloss.Style
	Failed     lipgloss.Style
}

// NewStyles builds the styles for a renderer; the renderer's colour profile
// decides how much of the colour survives (none under NO_COLOR or on a dumb
// terminal).
func NewStyles(r *lipgloss.Renderer) Styles {
	red := lipgloss.AdaptiveColor{Light: "160", Dark: "203"}
	yellow := lipgloss.AdaptiveColor{Light: "136", Dark: "221"}
	green := lipgloss.AdaptiveColor{Light: "28", Dark: "114"}
	blue := lipgloss.AdaptiveColor{Light: "25", Dark: "117"}
	grey := lipgloss.AdaptiveColor{Light: "244", Dark: "245"}
	accent := lipgloss.AdaptiveColor{Light: "57", Dark: "141"}
	return Styles{
		Title:      r.NewStyle().Bold(true).Foreground(accent),
		Tab:        r.NewStyle().Foreground(grey),
		ActiveTab:  r.NewStyle().Bold(true).Underline(true),
		Status:     r.NewStyle().Foreground(grey),
		Header:     r.NewStyle().Bold(true),
		Row:        r.NewStyle(),
		Selected:   r.NewStyle().Reverse(true),
		Muted:      r.NewStyle().Foreground(grey),
		Label:      r.NewStyle().Bold(true),
		Warning:    r.NewStyle().Foreground(red).Bold(true),
		Banner:     r.NewStyle().Foreground(red).Bold(true),
		Progress:   r.NewStyle().Foreground(blue),
		Dialog:     r.NewStyle().Border(lipgloss.NormalBorder()).BorderForeground(red).Padding(1, 3),
		DialogText: r.NewStyle(),
		Filter:     r.NewStyle().Foreground(accent),
		Help:       r.NewStyle().Foreground(grey),
		Scheduled:  r.NewStyle().Foreground(blue),
		Running:    r.NewStyle().Foreground(green),
		Retrying:   r.NewStyle().Foreground(yellow),
		Dead:       r.NewStyle().Foreground(red).Bold(true),
		Completed:  r.NewStyle().Foreground(green),
		Failed:     r.NewStyle().Foreground(red),
	}
}

func (s Styles) state(st durablev1.ActivityState) lipgloss.Style {
	switch st {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED:
		return s.Scheduled
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		return s.Running
	case durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		return s.Retrying
	case durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED:
		return s.Dead
	}
	return s.Row
}

func (s Styles) status(st durablev1.WorkflowStatus) lipgloss.Style {
	switch st {
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING:
		return s.Running
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED:
		return s.Completed
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED:
		return s.Failed
	}
	return s.Row
}

// opState colours an operation's state: in progress, done, or stopped short.
func (s Styles) opState(st durablev1.OperationState) lipgloss.Style {
	switch st {
	case durablev1.OperationState_OPERATION_STATE_RUNNING:
		return s.Progress
	case durablev1.OperationState_OPERATION_STATE_COMPLETED:
		return s.Completed
	case durablev1.OperationState_OPERATION_STATE_CANCELLED:
		return s.Retrying
	}
	return s.Row
}

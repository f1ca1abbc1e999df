package tui

import (
	"encoding/base64"
	"io"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/activity"
)

// y copies the id under the cursor with OSC 52: the terminal, not this
// machine, sets its clipboard, so it works over SSH. The sequence is
// ESC ] 52 ; c ; base64 BEL, with nothing of the id but its base64 form,
// so an id cannot put a control sequence on the terminal. Inside tmux it
// takes `set -g set-clipboard on` (the default, external, drops what a
// program sends); tmux then hands it to the outer terminal itself.
//
// Bubble Tea 1.x has no command for raw output, so the sequence goes to the
// terminal in one write of its own. The renderer writes each frame in one
// write too, and a terminal takes each write whole, so the two do not mix.

// osc52 is the sequence that sets the clipboard to text.
func osc52(text string) []byte {
	b := make([]byte, 0, len("\x1b]52;c;\a")+base64.StdEncoding.EncodedLen(len(text)))
	b = append(b, "\x1b]52;c;"...)
	b = base64.StdEncoding.AppendEncode(b, []byte(text))
	return append(b, '\a')
}

// copyFailedMsg says the sequence could not be written.
type copyFailedMsg struct{ err error }

// copyCmd writes the sequence for text to w.
func copyCmd(w io.Writer, text string) tea.Cmd {
	return func() tea.Msg {
		if _, err := w.Write(osc52(text)); err != nil {
			return copyFailedMsg{err: err}
		}
		return nil
	}
}

// activityRef is "workflow_id/activity_id", the way wf names an activity.
func activityRef(workflowID, activityID string) (raw, shown string) {
	return workflowID + "/" + activityID, activity.EscapeID(workflowID) + "/" + activity.EscapeID(activityID)
}

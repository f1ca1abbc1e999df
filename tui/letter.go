package tui

import (
	"fmt"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// letterWatch is the one dead letter this console last redrove. The call's
// answer only says the daemon took the letter out of the dead-letter queue;
// what came of it arrives later on the stream, and the status line says so
// when it does: running again, failed again, dead-lettered again, finished.
type letterWatch struct {
	r   ref
	key string
	// redrives is the letter's redrive count before this redrive: dead
	// with more than that is dead again, not yet released.
	redrives int32
	// said is the last outcome said, so each is said once.
	said string
}

// watchLetter starts following r after the daemon accepted its redrive.
func (m Model) watchLetter(r ref, reason string) Model {
	key := activityKey(r.workflowID, r.activityID)
	w := &letterWatch{r: r, key: key}
	if a, ok := m.st.acts[key]; ok {
		w.redrives = a.GetRedrives()
		if !isDead(a) {
			// The stream told of the release before the call answered.
			w.redrives--
		}
	}
	m.letter = w
	m = m.say("released " + r.String() + " from the DLQ" + reasonNote(reason) + " · waiting for its next attempt")
	m.letter.said = m.flash.text
	return m.letterOutcome()
}

// letterOutcome says what became of the followed letter, if the stream has
// told anything new; a final outcome ends the following.
func (m Model) letterOutcome() Model {
	w := m.letter
	if w == nil || !m.conn.live {
		return m
	}
	a, ok := m.st.acts[w.key]
	var text string
	warn, done := false, false
	switch {
	case !ok:
		text, done = w.r.String()+" finished after its redrive", true
	case isDead(a) && a.GetRedrives() > w.redrives:
		text, warn, done = w.r.String()+" dead-lettered again: "+failureLine(a.GetLastFailure()), true, true
	case isDead(a):
		return m // the release has not reached the stream yet
	case a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		text = fmt.Sprintf("%s running again (attempt %d)", w.r, a.GetAttempt())
	case a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		text, warn = fmt.Sprintf("%s failed again (attempt %d), retrying: %s", w.r, a.GetAttempt(), failureLine(a.GetLastFailure())), true
	default:
		return m
	}
	if done {
		m.letter = nil
	} else {
		w := *w
		w.said = text
		if text == m.letter.said {
			return m
		}
		m.letter = &w
	}
	if warn {
		return m.warn(text)
	}
	return m.say(text)
}

package tui

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// flash is the outcome of the last action, shown under the header. A new
// action replaces it, any key clears it, and it expires on its own: an
// outcome after flashFor, a failure after warnFor.
type flash struct {
	text string
	warn bool // an error: shown as a warning
	// refused marks the answer to an action offered while nothing can be
	// changed (offline, writes refused): its words are redrawn from the
	// connection as it is now, and it goes when the connection is back.
	refused bool
	// op is the operation whose outcome the flash tells: its words are
	// redrawn from the operation as the daemon last reported it, since
	// letters it released go on dead-lettering again after it completed.
	op string
	at time.Time // by the console's own clock
}

// An outcome ("op-7 completed: …") is read in a glance and stays long
// enough to be read twice; it would otherwise be mistaken for news about
// the state on screen, which moves on. A failure asks for something to be
// done, so it stays until a key says it was seen, but not forever: half a
// minute later what failed has likely changed, and the operation, the
// audit log or the dead letters say what holds now.
const (
	flashFor = 8 * time.Second
	warnFor  = 30 * time.Second
)

// say shows text as the outcome of the last action.
func (m Model) say(text string) Model {
	m.flash = flash{text: text, at: m.clk.local}
	return m
}

// sayOutcome shows how operation op ended, kept up to date while shown.
func (m Model) sayOutcome(op *durablev1.Operation) Model {
	m = m.say(opOutcome(op))
	m.flash.op = op.GetId()
	return m
}

// flashText is the flash's words as they stand now.
func (m Model) flashText() string {
	if m.flash.op != "" {
		if op, ok := m.ops.get(m.flash.op); ok {
			return opOutcome(op)
		}
	}
	return m.flash.text
}

// warn shows text as a failed action.
func (m Model) warn(text string) Model {
	m.flash = flash{text: text, warn: true, at: m.clk.local}
	return m
}

// expireFlash clears the flash once its time is up.
func (m Model) expireFlash() Model {
	if m.flash.text == "" && !m.flash.refused {
		return m
	}
	d := flashFor
	if m.flash.warn {
		d = warnFor
	}
	if !m.clk.local.Before(m.flash.at.Add(d)) {
		m.flash = flash{}
	}
	return m
}

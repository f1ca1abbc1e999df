package tui

import (
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// Offline, and while the daemon refuses writes, the console shows what it
// last knew and offers nothing that would change it: every key that would
// open a dialog (a redrive, the cancel of an operation, anything that
// writes) answers with the reason instead, the help bar leaves those keys
// out, and ctrl+r reconnects without waiting out the backoff.

// writesBlocked says why nothing that changes the daemon's state can be
// asked for now, or "" when it can.
func (m Model) writesBlocked() string {
	switch {
	case !m.conn.live && !m.conn.synced && m.conn.failures == 0:
		return "not connected yet: waiting for the daemon's snapshot"
	case !m.conn.live && m.conn.retrying:
		return "offline: reconnecting now"
	case !m.conn.live:
		return "offline: reconnecting in " + m.reconnectIn() + " — ctrl+r to reconnect now"
	case m.conn.writes.GetRefused():
		return "the daemon refuses writes: " + oneLine(m.conn.writes.GetReason())
	}
	return ""
}

// reconnectIn is the time left before the next reconnection, in whole
// seconds rounded up.
func (m Model) reconnectIn() string {
	left := m.conn.retryAt.Sub(m.clk.local)
	secs := int((left + time.Second - 1) / time.Second)
	return fmt.Sprintf("%ds", max(secs, 0))
}

// refuse answers an action that would change state while nothing can be
// changed. The words are drawn from the connection as it is when shown, so
// "reconnecting in 3s" counts down, and the answer goes when the daemon
// takes changes again.
func (m Model) refuse() Model {
	m.flash = flash{refused: true, warn: true, at: m.clk.local}
	return m
}

// guardWrite keeps the dialog a key opened only when the daemon can do what
// it asks: otherwise the console stays as it was (before) and says why.
// Every dialog is the confirmation of a change of state, so a new one is
// guarded without being named here.
func (m Model) guardWrite(before Model, cmd tea.Cmd) (Model, tea.Cmd) {
	if m.confirm == nil || before.confirm != nil || before.writesBlocked() == "" {
		return m, cmd
	}
	return before.refuse(), nil
}

// confirmBlocked reports whether msg would carry out the open dialog while
// nothing can be changed: the dialog stays open, with the reason above it,
// for when the daemon is back.
func (m Model) confirmBlocked(msg tea.KeyMsg) bool {
	if m.writesBlocked() == "" || m.confirm.override.typing() {
		return false
	}
	if m.confirm.editing {
		return key.Matches(msg, m.keys.Submit)
	}
	return key.Matches(msg, m.keys.Confirm)
}

// reconnectNow drops the scheduled reconnection (and an attempt under way)
// and connects at once.
func (m Model) reconnectNow() (Model, tea.Cmd) {
	if m.conn.live {
		return m.say("live: nothing to reconnect"), nil
	}
	if m.conn.stream != nil {
		m.conn.stream.cancel()
		m.conn.stream = nil
	}
	m.conn.gen++ // the pending reconnectMsg and any older answer are ignored
	m.conn.retrying = true
	m.conn.stageActs, m.conn.stageWfs, m.conn.stageOps, m.conn.stagePolicy = nil, nil, nil, nil
	return m, connectCmd(m.p.Context, m.p.Backend, m.conn.gen)
}

// asOfText is the header's "as of 06:14:05 UTC": when the rows on screen
// were last known to be true, with the date when it was another day.
func (m Model) asOfText() string {
	t := m.clk.asOf.UTC()
	if now := m.daemonNow().UTC(); now.YearDay() != t.YearDay() || now.Year() != t.Year() {
		return "as of " + t.Format("2006-01-02 15:04:05 UTC")
	}
	return "as of " + t.Format("15:04:05 UTC")
}

// withoutWrites is the help of a screen while nothing can be changed: the
// keys that would change state leave it, the help bar and the full help
// alike; pressed anyway, they say why.
func (k screenKeys) withoutWrites(writes []key.Binding) screenKeys {
	keep := func(bs []key.Binding) []key.Binding {
		var out []key.Binding
		for _, b := range bs {
			write := false
			for _, w := range writes {
				write = write || sameKeys(b, w)
			}
			if !write {
				out = append(out, b)
			}
		}
		return out
	}
	full := make([][]key.Binding, len(k.full))
	for i, group := range k.full {
		full[i] = keep(group)
	}
	return screenKeys{short: keep(k.short), full: full}
}

// sameKeys reports whether two bindings answer the same keys.
func sameKeys(a, b key.Binding) bool {
	ka, kb := a.Keys(), b.Keys()
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

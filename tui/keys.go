package tui

import "github.com/charmbracelet/bubbles/key"

// KeyMap is every binding of the console. Screens show the subset that applies
// to them through the help bar; FullHelp (on ?) shows them all.
type KeyMap struct {
	Up         key.Binding
	Down       key.Binding
	PageUp     key.Binding
	PageDown   key.Binding
	Top        key.Binding
	Bottom     key.Binding
	Attempts   key.Binding
	DeadLetter key.Binding
	Workflows  key.Binding
	Audit      key.Binding
	Operations key.Binding
	Queues     key.Binding
	Stats      key.Binding
	NextView   key.Binding
	Filter     key.Binding
	Open       key.Binding
	Back       key.Binding
	Redrive    key.Binding
	RedriveAll key.Binding
	Group      key.Binding
	CancelOp   key.Binding
	Reconnect  key.Binding
	Sort       key.Binding
	NextStuck  key.Binding
	HideDead   key.Binding
	Timeline   key.Binding
	Copy       key.Binding
	Override   key.Binding
	Help       key.Binding
	Quit       key.Binding
	// The keys of a dialog (a redrive, or the cancel of an operation).
	Confirm    key.Binding
	EditReason key.Binding
	Submit     key.Binding
	Cancel     key.Binding
}

// DefaultKeyMap is the k9s/lazygit-style keyboard model.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:         key.NewBinding(key.WithKeys("k", "up"), key.WithHelp("↑/k", "up")),
		Down:       key.NewBinding(key.WithKeys("j", "down"), key.WithHelp("↓/j", "down")),
		PageUp:     key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
		PageDown:   key.NewBinding(key.WithKeys("pgdown", "ctrl+d", " "), key.WithHelp("pgdn", "page down")),
		Top:        key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "first")),
		Bottom:     key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "last")),
		Attempts:   key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "attempts")),
		DeadLetter: key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "dead letters")),
		Workflows:  key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "workflows")),
		Audit:      key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "audit log")),
		Operations: key.NewBinding(key.WithKeys("5"), key.WithHelp("5", "operations")),
		Queues:     key.NewBinding(key.WithKeys("6"), key.WithHelp("6", "queues")),
		Stats:      key.NewBinding(key.WithKeys("7"), key.WithHelp("7", "stats")),
		NextView:   key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next view")),
		Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Open:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Back:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Redrive:    key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "redrive")),
		RedriveAll: key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "redrive all shown")),
		Group:      key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "group by failure")),
		CancelOp:   key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "cancel operation")),
		Reconnect:  key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "reconnect")),
		Sort:       key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		NextStuck:  key.NewBinding(key.WithKeys("!"), key.WithHelp("!", "next stuck")),
		HideDead:   key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "hide/show dead letters")),
		Timeline:   key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "workflow timeline")),
		Copy:       key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "copy id")),
		Override:   key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "set policy override")),
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Confirm:    key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "redrive")),
		EditReason: key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "give a reason")),
		Submit:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "redrive with this reason")),
		Cancel:     key.NewBinding(key.WithKeys("esc", "ctrl+c"), key.WithHelp("esc", "cancel")),
	}
}

// screenKeys is the help.KeyMap of one screen: the bindings that do something
// there, plus the global ones.
type screenKeys struct {
	short []key.Binding
	full  [][]key.Binding
}

// ShortHelp is the one-line help bar.
func (k screenKeys) ShortHelp() []key.Binding { return k.short }

// FullHelp is the help shown on ?.
func (k screenKeys) FullHelp() [][]key.Binding { return k.full }

func (k KeyMap) navigation() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}
}

func (k KeyMap) views() []key.Binding {
	return []key.Binding{k.Attempts, k.DeadLetter, k.Workflows, k.Audit, k.Operations, k.Queues, k.Stats, k.NextView}
}

// writes are the keys that ask the daemon to change state (and e, which the
// full help lists as their way to give a reason); they leave the help and
// do nothing but say why while the daemon cannot take a change.
func (k KeyMap) writes() []key.Binding {
	return []key.Binding{k.Redrive, k.RedriveAll, k.CancelOp, k.EditReason, k.Override}
}

func (k KeyMap) forScreen(c component) screenKeys {
	global := []key.Binding{k.Help, k.Quit}
	own, full := c.Help(k)
	if full == nil {
		full = own
	}
	return screenKeys{
		short: append(append([]key.Binding{}, own...), global...),
		full:  [][]key.Binding{full, k.navigation(), k.views(), append([]key.Binding{k.Back}, global...)},
	}
}

// withReason is the dialog's e, listed on ? after the keys that open a
// dialog.
func (k KeyMap) withReason() key.Binding {
	reason := k.EditReason
	reason.SetHelp("e", "…with a reason")
	return reason
}

// forDialog is the help of a dialog: what y, e, enter and esc do there,
// whatever screen is underneath.
func (k KeyMap) forDialog(c *confirm) screenKeys {
	yes, submit, no := k.Confirm, k.Submit, k.Cancel
	if c.opID != "" {
		yes.SetHelp("y", "cancel "+c.opID)
		submit.SetHelp("enter", "cancel it with this reason")
		no.SetHelp("esc", "keep it running")
	}
	if c.override != nil {
		yes.SetHelp("y", "set the override")
		submit.SetHelp("enter", "set it with this reason")
	}
	own := []key.Binding{yes, k.EditReason, no}
	if c.override.typing() {
		submit.SetHelp("enter", "read the options")
		queue := key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "this queue only / every queue"))
		own = []key.Binding{submit, queue, no}
	} else if c.editing {
		own = []key.Binding{submit, no}
	}
	return screenKeys{short: own, full: [][]key.Binding{own}}
}

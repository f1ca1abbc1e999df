package tui

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// overrideAsk is the dialog p opens on the detail pane: first a line of
// option words (wf's option names, read by client.ParseOptionWords), then,
// once they read, what changes and the reason, as in a redrive's dialog.
type overrideAsk struct {
	target client.PolicyTarget
	act    *durablev1.PendingActivity // as the detail showed it when p was pressed
	words  textinput.Model
	patch  *durablev1.OptionsPatch // nil while the words are being typed
	err    string                  // why the words last entered do not read
}

// typing reports whether the dialog is still reading option words.
func (o *overrideAsk) typing() bool { return o != nil && o.patch == nil }

// askOverride opens the override dialog for the activity in the detail pane.
func (m Model) askOverride() (Model, tea.Cmd) {
	a := m.detailActivity()
	if m.screen != screenDetail || a == nil {
		return m, nil
	}
	in := textinput.New()
	in.Prompt = "options: "
	in.Placeholder = "e.g. max-attempts=8 initial=30s start-to-close=2m"
	in.CharLimit = maxReason
	in.Width = max(dialogWidth(m.width)-len("options: ")-1, 1)
	in.PromptStyle = m.styles.Label
	in.Cursor.SetMode(cursor.CursorStatic)
	cmd := in.Focus()
	m.confirm = &confirm{
		override: &overrideAsk{target: client.PolicyTarget{ActivityType: a.GetActivityType()}, act: a, words: in},
		reason:   m.reasonInput("e.g. INC-7, the gateway needs longer"),
	}
	return m, cmd
}

// overrideWordsKey handles a key while the option words are typed: enter
// reads them (and stays, naming the bad word, when they do not read), tab
// narrows the override to the activity's task queue and back, esc cancels.
func (m Model) overrideWordsKey(msg tea.KeyMsg) (Model, tea.Cmd) {
	c := *m.confirm
	o := *c.override
	switch {
	case key.Matches(msg, m.keys.Submit):
		p, err := client.ParseOptionWords(o.words.Value())
		if err != nil {
			o.err = err.Error()
		} else {
			o.patch, o.err = p, ""
			o.words.Blur()
		}
		c.override = &o
		m.confirm = &c
		return m, nil
	case key.Matches(msg, m.keys.Cancel):
		return m.cancelConfirm(), nil
	case msg.Type == tea.KeyTab:
		if o.target.TaskQueue == "" {
			o.target.TaskQueue = o.act.GetTaskQueue()
		} else {
			o.target.TaskQueue = ""
		}
		c.override = &o
		m.confirm = &c
		return m, nil
	}
	var cmd tea.Cmd
	o.words, cmd = o.words.Update(msg)
	c.override = &o
	m.confirm = &c
	return m, cmd
}

// setOverride sends the override the dialog c confirmed.
func (m Model) setOverride(c confirm, reason string) (Model, tea.Cmd) {
	o := c.override
	m.flash = flash{}
	b, ctx := m.p.Backend, m.p.Context
	return m.say("setting the override of " + o.target.String() + "…"), func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		got, err := b.SetPolicyOverride(cctx, o.target, o.patch, reason)
		return overrideDoneMsg{target: o.target, words: overrideWords(o), override: got, err: err}
	}
}

// overrideDoneMsg answers SetPolicyOverride. The detail shows the new
// policy when the daemon's Watch reports the override.
type overrideDoneMsg struct {
	target   client.PolicyTarget
	words    string
	override *durablev1.PolicyOverride
	err      error
}

func (m Model) overrideDone(msg overrideDoneMsg) Model {
	if msg.err != nil {
		return m.warn("override of " + msg.target.String() + " not set: " + errorText(msg.err))
	}
	return m.say("override of " + msg.target.String() + " set: " + msg.words)
}

// overrideWords are the changes o makes to the activity it was opened on,
// for the flash: "max attempts 5 → 8, initial 1s → 30s".
func overrideWords(o *overrideAsk) string {
	ch := overrideChanges(o.act, o.patch)
	if len(ch) == 0 {
		return "no change for this activity"
	}
	return strings.Join(ch, ", ")
}

// overrideChanges are the fields of the policy in force that the override
// would change for a: it replaces any override the target had, so the
// result is the patch over the code's options (activity.ApplyPatch, the one
// meaning of a patch), compared with what is in force now.
func overrideChanges(a *durablev1.PendingActivity, p *durablev1.OptionsPatch) []string {
	before := activity.OptionsInForce(a)
	after, _ := activity.ApplyPatch(a.GetOptions(), p)
	var out []string
	for _, f := range overrideFields {
		b, n := f.show(before), f.show(after)
		if f.name == "max attempts" && before.GetRetryPolicy().GetMaxAttempts() == 0 && a.GetMaxAttempts() > 0 {
			b = fmt.Sprint(a.GetMaxAttempts()) // the daemon's default, as the detail shows it
		}
		if b != n {
			out = append(out, f.name+" "+b+" → "+n)
		}
	}
	return out
}

// overrideFields are the options a patch can set, named as the detail
// pane names them.
var overrideFields = []struct {
	name string
	show func(*durablev1.ActivityOptions) string
}{
	{"initial", func(o *durablev1.ActivityOptions) string { return shortDur(activity.Backoff(o.GetRetryPolicy(), 1)) }},
	{"backoff", func(o *durablev1.ActivityOptions) string {
		return fmt.Sprintf("×%g", effectiveFactor(o.GetRetryPolicy()))
	}},
	{"max interval", func(o *durablev1.ActivityOptions) string {
		return shortDur(activity.Backoff(o.GetRetryPolicy(), 1000))
	}},
	{"max attempts", func(o *durablev1.ActivityOptions) string {
		if n := o.GetRetryPolicy().GetMaxAttempts(); n > 0 {
			return fmt.Sprint(n)
		}
		return "default"
	}},
	{"never retried", func(o *durablev1.ActivityOptions) string {
		if nr := o.GetRetryPolicy().GetNonRetryable(); len(nr) > 0 {
			return strings.Join(nr, ",")
		}
		return "none"
	}},
	{"start-to-close", func(o *durablev1.ActivityOptions) string { return spanOrNone(o.GetStartToCloseTimeout()) }},
	{"heartbeat timeout", func(o *durablev1.ActivityOptions) string { return spanOrNone(o.GetHeartbeatTimeout()) }},
	{"schedule-to-close", func(o *durablev1.ActivityOptions) string { return spanOrNone(o.GetScheduleToCloseTimeout()) }},
}

func spanOrNone(d *durationpb.Duration) string {
	if d == nil || d.AsDuration() == 0 {
		return "none"
	}
	return shortDur(d.AsDuration())
}

// overrideDialogView is the dialog before setting an override: the target,
// the words, then what changes and the reason.
func (m Model) overrideDialogView(h int) string {
	st := m.styles
	c := m.confirm
	o := c.override
	textW := dialogWidth(m.width)
	lines := []string{st.Warning.Render("Set a policy override for " + ansi.Truncate(activity.EscapeID(o.target.ActivityType), textW-30, "…") + "?"), ""}
	where := "on every task queue · tab: only on " + activity.EscapeID(o.act.GetTaskQueue())
	if o.target.TaskQueue != "" {
		where = "only on task queue " + activity.EscapeID(o.target.TaskQueue) + " · tab: every queue"
	}
	if o.typing() {
		lines = append(lines, st.Muted.Render(ansi.Truncate(where, textW, "…")), "", o.words.View())
		if o.err != "" {
			for _, l := range wrapWords(o.err, textW) {
				lines = append(lines, st.Failed.Render(l))
			}
		} else {
			for _, l := range wrapWords("words: "+strings.Join(client.OptionWordNames, "= ")+"=", textW) {
				lines = append(lines, st.Muted.Render(l))
			}
		}
		lines = append(lines, "", st.Label.Render("enter")+" read the options    "+st.Label.Render("esc")+" cancel")
		return m.dialogBox(lines, h)
	}
	lines = append(lines, st.Muted.Render(ansi.Truncate(onWhere(o.target), textW, "…")))
	lines = append(lines, st.Label.Render("options ")+ansi.Truncate(o.words.Value(), textW-len("options "), "…"), "")
	changes := overrideChanges(o.act, o.patch)
	if len(changes) == 0 {
		lines = append(lines, st.Muted.Render("changes nothing in force for "+activity.EscapeID(o.act.GetActivityId())))
	}
	for _, ch := range changes {
		lines = append(lines, ansi.Truncate(ch, textW, "…"))
	}
	lines = append(lines, st.Muted.Render(ansi.Truncate("replaces any override it had; pending ones follow from their next decision", textW, "…")), "")
	lines = append(lines, m.reasonLines("set it", "cancel")...)
	return m.dialogBox(lines, h)
}

func onWhere(t client.PolicyTarget) string {
	if t.TaskQueue == "" {
		return "every activity of this type, on every task queue"
	}
	return "every activity of this type on task queue " + activity.EscapeID(t.TaskQueue)
}

// wrapWords breaks s at spaces into lines of at most w cells (a longer word
// is cut), keeping option names such as max-interval whole.
func wrapWords(s string, w int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
			line += " " + word
		default:
			lines = append(lines, ansi.Truncate(line, w, "…"))
			line = word
		}
	}
	return append(lines, ansi.Truncate(line, w, "…"))
}

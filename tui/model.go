package tui

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// screen is what fills the body of the console.
type screen int

// The list screens come first, in tab order; the ones after
// screenStats are opened from a list and return to it.
const (
	screenAttempts screen = iota
	screenDeadLetters
	screenWorkflows
	screenAudit
	screenOperations
	screenQueues
	screenStats
	screenDetail
	screenTimeline
	screenAuditRecord
	screenOperation
	screenQueue
	// screenCount is the number of screens.
	screenCount
)

// lastList is the last list screen: tab goes round to the first after it.
const lastList = screenStats

// isList reports whether s is a list screen with a tab in the header.
func (s screen) isList() bool { return s <= lastList }

// Params configure New. Only Backend is required.
type Params struct {
	// Backend is the daemon.
	Backend Backend
	// Addr is shown in the header so the operator knows which daemon this is.
	Addr string
	// Context bounds every call; cancel it to stop the Watch stream.
	Context context.Context
	// ClockFunc is the console's clock, read only when a tick is due; tests
	// fix it so countdowns render the same every run. Default time.Now.
	ClockFunc func() time.Time
	// Renderer decides the colour profile; default lipgloss's, which honours
	// NO_COLOR and plain terminals.
	Renderer *lipgloss.Renderer
	// ReconnectDelayFunc is the wait before reconnection attempt n (n >= 1)
	// after the stream failed. Default: 500ms doubling, capped at 10s.
	ReconnectDelayFunc func(n int) time.Duration
	// RedrivesPerSecond is the rate at which the daemon releases the
	// letters of a redrive operation the console starts. Default 50.
	RedrivesPerSecond int
	// Clipboard is where y writes the OSC 52 sequence that sets the
	// terminal's clipboard: the terminal the console draws on. Default
	// os.Stdout.
	Clipboard io.Writer
}

// defaultReconnectDelay is 0.5s, 1s, 2s, … capped at 10s.
func defaultReconnectDelay(n int) time.Duration {
	d := 500 * time.Millisecond
	for i := 1; i < n && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// conn is the state of the Watch subscription.
type conn struct {
	gen       int // bumps on every (re)connection; older messages are ignored
	stream    *watchStream
	live      bool // the snapshot arrived and the stream is open
	synced    bool // a snapshot arrived at least once
	failures  int
	retryAt   time.Time
	retrying  bool // a reconnection is in progress
	lastErr   string
	stageActs []*durablev1.PendingActivity
	stageWfs  []*durablev1.WorkflowInfo
	stageOps  []*durablev1.Operation
	// stagePolicy holds the snapshot's policy overrides until it is done.
	stagePolicy []*durablev1.PolicyOverride
	// writes is whether the daemon takes changes of state, as last heard.
	writes *durablev1.WritesState
}

// detail is the activity detail pane's own state.
type detail struct {
	key        string
	last       *durablev1.PendingActivity  // shown if the activity goes away
	finished   *durablev1.FinishedActivity // how it ended, once it has
	history    []*durablev1.HistoryEvent
	historyErr string
	loading    bool
	scroll     int
}

// timeline is a workflow's history, read again as the stream says the
// workflow changed (see timeline.go).
type timeline struct {
	workflowID string
	events     []*durablev1.HistoryEvent
	err        string
	loading    bool
	scroll     int
	// from is the screen esc returns to: a list, or the detail pane.
	from screen
	// seq tells this opening's answers and timers from an earlier one's.
	seq int
	// reading: a read is under way; lastRead: when it (or the one before)
	// started; waiting: a read is held until refreshEvery has passed since;
	// stale: the workflow changed while reading or waiting.
	reading  bool
	lastRead time.Time
	waiting  bool
	stale    bool
	// refreshErr is why the last read again failed; the events shown are
	// those of the read before.
	refreshErr string
}

// Model is the console. Create it with New and run it with tea.NewProgram.
type Model struct {
	p      Params
	keys   KeyMap
	styles Styles
	help   help.Model
	input  textinput.Model

	width, height int
	// now is the time the rows are drawn against (see clock.go): the
	// daemon's present while live, the as-of time while offline.
	now     time.Time
	clk     clock
	tickDue bool

	st   *state
	conn conn

	// screen is the active component of views; back is the list under a
	// detail, an audit record, an operation, a queue or a timeline (esc
	// from a timeline goes to where it was opened from).
	screen    screen
	back      screen
	views     views
	filtering bool
	// filterErr is why the words typed in the filter bar do not read.
	filterErr string

	audit   *auditLog
	ops     *opLog
	confirm *confirm
	job     *redriveJob // the redrive being waited on, if any
	jobs    int         // redrives started, for telling answers apart
	// follow are the operations this console started that have not been
	// seen finishing, oldest first: the newest running one has the status
	// line, and each says how it ended when it does.
	follow []string
	// letter is the single letter last redriven, whose outcome the status
	// line tells as the stream brings it.
	letter *letterWatch
	// cancelling is the operation whose cancel is being waited on.
	cancelling string
	flash      flash
	// after is tea.Tick's shape, a field so tests can hold a timer's
	// message and send it when they choose.
	after func(d time.Duration, msg tea.Msg) tea.Cmd
}

// New returns a console that follows p.Backend.
func New(p Params) Model {
	if p.Context == nil {
		p.Context = context.Background()
	}
	if p.ClockFunc == nil {
		p.ClockFunc = time.Now
	}
	if p.Renderer == nil {
		p.Renderer = lipgloss.DefaultRenderer()
	}
	if p.ReconnectDelayFunc == nil {
		p.ReconnectDelayFunc = defaultReconnectDelay
	}
	if p.RedrivesPerSecond <= 0 {
		p.RedrivesPerSecond = 50
	}
	if p.Clipboard == nil {
		p.Clipboard = os.Stdout
	}
	styles := NewStyles(p.Renderer)
	h := help.New()
	h.Styles.ShortKey = styles.Help.Bold(true)
	h.Styles.ShortDesc = styles.Help
	h.Styles.ShortSeparator = styles.Help
	h.Styles.FullKey = styles.Help.Bold(true)
	h.Styles.FullDesc = styles.Help
	h.Styles.FullSeparator = styles.Help
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = "type:Timeout act:ChargeCard wf:order-* state:retrying attempt>=3 nopoller, or text"
	in.PromptStyle = styles.Filter
	in.Cursor.SetMode(cursor.CursorStatic) // no blinking: views are reproducible
	start := p.ClockFunc()
	st := newState()
	st.now = start
	return Model{
		now:    start,
		clk:    clock{local: start},
		p:      p,
		keys:   DefaultKeyMap(),
		styles: styles,
		help:   h,
		input:  in,
		width:  80,
		height: 24,
		st:     st,
		audit:  newAuditLog(),
		ops:    newOpLog(),
		after:  tick,
	}
}

// Init connects to the daemon and starts the clock.
func (m Model) Init() tea.Cmd {
	return tea.Batch(connectCmd(m.p.Context, m.p.Backend, m.conn.gen), tickCmd(time.Second, m.p.ClockFunc))
}

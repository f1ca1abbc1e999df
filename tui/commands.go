package tui

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Every call to the daemon happens here, inside a tea.Cmd, so Update never
// blocks and tests can see every call through the Backend.

// callTimeout bounds one unary call so a hung daemon cannot wedge a redrive.
const callTimeout = 10 * time.Second

type watchStream struct {
	WatchStream
	cancel context.CancelFunc
}

type (
	streamOpenedMsg struct {
		gen    int
		stream *watchStream
	}
	// watchEventMsg is an event of the stream, stamped with the console's
	// clock when it was received: a countdown is drawn from then, not from
	// the last tick.
	watchEventMsg struct {
		gen int
		ev  *durablev1.WatchEvent
		at  time.Time
	}
	// streamErrMsg ends a stream; at is when the console saw it end.
	streamErrMsg struct {
		gen int
		err error
		at  time.Time
	}
	reconnectMsg struct{ gen int }
	tickMsg      struct{ now time.Time }
	historyMsg   struct {
		workflowID string
		events     []*durablev1.HistoryEvent
		err        error
	}
	auditMsg struct {
		records []*durablev1.AuditRecord
		err     error
	}
	// finishedMsg answers finishedCmd: the activity as it finished, nil if
	// the daemon no longer keeps it.
	finishedMsg struct {
		key      string
		finished *durablev1.FinishedActivity
		err      error
	}
	// redriveDoneMsg answers a redrive; op is set for a bulk one, the
	// operation the daemon started.
	redriveDoneMsg struct {
		job int
		op  *durablev1.Operation
		err error
	}
	// cancelDoneMsg answers the cancel of operation id.
	cancelDoneMsg struct {
		id  string
		op  *durablev1.Operation
		err error
	}
)

func connectCmd(ctx context.Context, b Backend, gen int) tea.Cmd {
	return func() tea.Msg {
		sctx, cancel := context.WithCancel(ctx)
		s, err := b.Watch(sctx)
		if err != nil {
			cancel()
			return streamErrMsg{gen: gen, err: err}
		}
		return streamOpenedMsg{gen: gen, stream: &watchStream{WatchStream: s, cancel: cancel}}
	}
}

func recvCmd(s *watchStream, gen int, clock func() time.Time) tea.Cmd {
	return func() tea.Msg {
		ev, err := s.Recv()
		if err != nil {
			s.cancel()
			return streamErrMsg{gen: gen, err: err, at: clock()}
		}
		return watchEventMsg{gen: gen, ev: ev, at: clock()}
	}
}

func reconnectCmd(d time.Duration, gen int) tea.Cmd {
	return tea.Tick(d, func(time.Time) tea.Msg { return reconnectMsg{gen: gen} })
}

func tickCmd(d time.Duration, clock func() time.Time) tea.Cmd {
	return tea.Tick(d, func(time.Time) tea.Msg { return tickMsg{now: clock()} })
}

func historyCmd(ctx context.Context, b Backend, workflowID string) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		events, err := b.History(cctx, workflowID)
		return historyMsg{workflowID: workflowID, events: events, err: err}
	}
}

// finishedCmd reads how an activity that left the pending set finished,
// with its whole attempt trail, from its workflow's description.
func finishedCmd(ctx context.Context, b Backend, key string, r ref) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		d, err := b.Describe(cctx, r.workflowID)
		msg := finishedMsg{key: key, err: err}
		for _, f := range d.GetFinishedActivities() {
			if f.GetActivity().GetActivityId() == r.activityID {
				msg.finished = f
			}
		}
		return msg
	}
}

// auditCmd reads the newest audit records.
func auditCmd(ctx context.Context, b Backend) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		recs, err := b.AuditLog(cctx, auditLoadLimit)
		return auditMsg{records: recs, err: err}
	}
}

func redriveCmd(ctx context.Context, b Backend, job int, r ref, reason string) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		err := b.Redrive(cctx, r.workflowID, r.activityID, reason)
		return redriveDoneMsg{job: job, err: err}
	}
}

// redriveListCmd starts one bulk redrive: the daemon answers at once with
// the operation that releases the letters.
func redriveListCmd(ctx context.Context, b Backend, job int, p RedriveListParams) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		op, err := b.RedriveList(cctx, p)
		return redriveDoneMsg{job: job, op: op, err: err}
	}
}

// cancelOpCmd cancels an operation; the daemon answers with it as it
// stopped.
func cancelOpCmd(ctx context.Context, b Backend, id, reason string) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		op, err := b.CancelOperation(cctx, id, reason)
		return cancelDoneMsg{id: id, op: op, err: err}
	}
}

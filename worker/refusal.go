package worker

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// refusedField returns the request field the daemon refused as invalid, and
// why, when err is an InvalidArgument carrying the daemon's BadRequest detail.
// The field is read from the detail, never parsed out of the message.
func refusedField(err error) (field, reason string, ok bool) {
	st, isStatus := status.FromError(err)
	if err == nil || !isStatus || st.Code() != codes.InvalidArgument {
		return "", "", false
	}
	for _, d := range st.Details() {
		br, isBR := d.(*errdetails.BadRequest)
		if !isBR {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			return v.GetField(), v.GetDescription(), true
		}
	}
	return "", "", false
}

// commandsRefused is the failure a workflow task reports when the daemon
// refused its commands: non-retryable, since the same code would send the
// same commands again, so the daemon fails the workflow with it. The
// message names the command, the field and the daemon's reason, which gives
// the bound.
func commandsRefused(cmds []*durablev1.Command, field, reason string) *durablev1.Failure {
	msg := fmt.Sprintf("the daemon refused the workflow task's commands: %s: %s", field, reason)
	if i, ok := commandIndex(field); ok && i < len(cmds) {
		msg += fmt.Sprintf(" (commands[%d] is %s)", i, describeCommand(cmds[i]))
	}
	return activity.FailureFromError(activity.NewNonRetryable(activity.TypeCommandsRefused, msg))
}

// commandIndex returns N of a field path that starts with "commands[N]".
func commandIndex(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "commands[")
	if !ok {
		return 0, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(rest[:end])
	return i, err == nil && i >= 0
}

// isCommandsField reports whether a refused field belongs to the commands,
// which the workflow code made, rather than to the call itself (its token).
func isCommandsField(field string) bool {
	return field == "commands" || strings.HasPrefix(field, "commands[")
}

func describeCommand(c *durablev1.Command) string {
	switch c.GetType() {
	case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
		return fmt.Sprintf("ScheduleActivity of %s, activity id %q", activity.EscapeID(c.GetActivityType()), c.GetActivityId())
	case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
		return fmt.Sprintf("StartTimer, timer id %q", c.GetTimerId())
	case durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW:
		return "CompleteWorkflow"
	case durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW:
		return "FailWorkflow"
	}
	return c.GetType().String()
}

// trimFailure returns f without details and with its message cut short: what
// a failure report the daemon refused as too large can still say.
func trimFailure(f *durablev1.Failure) *durablev1.Failure {
	const keep = 512
	return activity.FailureFromError(&activity.Error{Type: f.GetType(), Message: cut(f.GetMessage(), keep), NoRetry: f.GetNonRetryable()})
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence,
// ending it with "…" when there is room for the mark.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := "…"
	if n < 4*len(mark) {
		mark = ""
	}
	end := max(n-len(mark), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

package worker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestRefusedField(t *testing.T) {
	t.Parallel()
	withDetail := func(code codes.Code, field, reason string) error {
		st, err := status.New(code, field+": "+reason).WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: reason}}})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name      string
		err       error
		wantField string
		wantOK    bool
	}{
		{"Nil", nil, "", false},
		{"InvalidWithDetail", withDetail(codes.InvalidArgument, "commands[2].input", "must be at most 10 bytes, got 11"), "commands[2].input", true},
		{"InvalidWithoutDetail", status.Error(codes.InvalidArgument, "commands[2].input: too big"), "", false},
		{"OtherCode", withDetail(codes.FailedPrecondition, "result", "x"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			field, _, ok := refusedField(tc.err)
			if field != tc.wantField || ok != tc.wantOK {
				t.Errorf("refusedField = %q, %v; want %q, %v", field, ok, tc.wantField, tc.wantOK)
			}
		})
	}
}

func TestCommandsRefusedNamesTheCommand(t *testing.T) {
	t.Parallel()
	cmds := []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: "1"},
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityType: "Charge", ActivityId: "2"},
	}
	tests := []struct {
		field string
		want  string
	}{
		{"commands[1].input", `commands[1].input: must be at most 8 bytes (commands[1] is ScheduleActivity of Charge, activity id "2")`},
		{"commands[0].timer_duration", `(commands[0] is StartTimer, timer id "1")`},
		{"commands[7].input", "commands[7].input: must be at most 8 bytes"},
		{"commands", "commands: must be at most 8 bytes"},
	}
	for _, tc := range tests {
		f := commandsRefused(cmds, tc.field, "must be at most 8 bytes")
		if f.GetType() != activity.TypeCommandsRefused || !f.GetNonRetryable() || !strings.Contains(f.GetMessage(), tc.want) {
			t.Errorf("commandsRefused(%s) = %v, want a non-retryable CommandsRefused saying %q", tc.field, f, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer message", 13, "a longer m…"},
		{"héhéhéhéhé", 12, "héhéhé…"}, {"héhéhéhéhé", 11, "héhéhéh"},
		{"ab", 1, "a"},
		{"日本語", 4, "日"},
		{"x", 0, ""},
	}
	for _, tc := range tests {
		got := cut(tc.s, tc.n)
		if got != tc.want || len(got) > max(tc.n, 0) || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q, want %q (valid UTF-8, at most %d bytes)", tc.s, tc.n, got, tc.want, tc.n)
		}
	}
}

// TestOversizedOutcome: an outcome over the bound the task carried becomes
// a non-retryable PayloadTooLarge whose message, naming size, bound and the
// original failure, itself fits the bound; one that fits, or a task without
// a bound, is left alone.
func TestOversizedOutcome(t *testing.T) {
	t.Parallel()
	boom := &durablev1.Failure{Type: "Boom", Message: "exploded"}
	tests := []struct {
		name    string
		result  []byte
		failure *durablev1.Failure
		limit   int64
		want    []string // nil: left alone
	}{
		{"Fits", make([]byte, 100), nil, 100, nil},
		{"NoBound", make([]byte, 1000), nil, 0, nil},
		{"Result", make([]byte, 101), nil, 100, []string{"result: 101 bytes", "limit of 100"}},
		{"Details", nil, &durablev1.Failure{Type: "Boom", Message: "exploded", Details: make([]byte, 300)}, 200, []string{"failure details: 300 bytes", "Boom: exploded"}},
		{"Message", nil, &durablev1.Failure{Type: "Boom", Message: strings.Repeat("m", 300)}, 200, []string{"failure message: 300 bytes"}},
		{"FailureFits", nil, boom, 100, nil},
	}
	for _, tc := range tests {
		f := oversized(tc.result, tc.failure, tc.limit)
		if tc.want == nil {
			if f != nil {
				t.Errorf("%s: oversized = %v, want nil", tc.name, f)
			}
			continue
		}
		if f.GetType() != activity.TypePayloadTooLarge || !f.GetNonRetryable() || int64(len(f.GetMessage())) > tc.limit {
			t.Errorf("%s: oversized = %v, want a non-retryable PayloadTooLarge within %d bytes", tc.name, f, tc.limit)
		}
		for _, w := range tc.want[:1] { // the message is cut to the bound; its start survives
			if !strings.Contains(f.GetMessage(), w) {
				t.Errorf("%s: message %q does not say %q", tc.name, f.GetMessage(), w)
			}
		}
	}
}

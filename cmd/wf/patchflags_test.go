package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestPatchFlagsSetOnlyWhatIsGiven(t *testing.T) {
	t.Parallel()
	i64 := func(n int64) *int64 { return &n }
	i32 := func(n int32) *int32 { return &n }
	f64 := func(f float64) *float64 { return &f }
	tests := []struct {
		name string
		args []string
		want *durablev1.OptionsPatch
	}{
		{"Nothing", nil, nil},
		{"MaxAttempts", []string{"--max-attempts", "6"}, &durablev1.OptionsPatch{MaxAttempts: i32(6)}},
		{"ZeroIsAValue", []string{"--max-attempts", "0", "--heartbeat-timeout", "0"},
			&durablev1.OptionsPatch{MaxAttempts: i32(0), HeartbeatTimeout: durationpb.New(0)}},
		{"RetryPolicy", []string{"--initial", "500ms", "--backoff", "1.5", "--max-interval", "1m"},
			&durablev1.OptionsPatch{InitialMs: i64(500), Backoff: f64(1.5), MaxIntervalMs: i64(60000)}},
		{"NegativeBackoffIsSent", []string{"--backoff", "-1"}, &durablev1.OptionsPatch{Backoff: f64(-1)}},
		{"NonRetryable", []string{"--non-retryable", "CardDeclined, Fraud"},
			&durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{"CardDeclined", "Fraud"}}}},
		{"EmptyNonRetryableClears", []string{"--non-retryable", ""},
			&durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{}}}},
		{"Timeouts", []string{"--start-to-close", "30s", "--schedule-to-close", "1h"},
			&durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(30 * time.Second), ScheduleToCloseTimeout: durationpb.New(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.String("reason", "", "")
			p := registerPatchFlags(fs)
			if err := fs.Parse(append(tt.args, "--reason", "r")); err != nil {
				t.Fatal(err)
			}
			got, err := p.patch()
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("patch = %v, want %v", got, tt.want)
			}
			if p.given() != (tt.want != nil) {
				t.Errorf("given() = %v with args %q", p.given(), tt.args)
			}
		})
	}
}

func TestPatchFlagsRefuseWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--initial", "-1s"},
		{"--initial", "1500us"},
		{"--max-interval", "-5ms"},
		{"--max-attempts", "-1"},
		{"--backoff", "NaN"},
		{"--backoff", "+Inf"},
		{"--start-to-close", "-1s"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p := registerPatchFlags(fs)
		if err := fs.Parse(args); err != nil {
			continue // refused by the flag package already
		}
		if _, err := p.patch(); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%q: err = %v, want one naming %s", args, err, args[0])
		}
	}
}

func TestPatchText(t *testing.T) {
	t.Parallel()
	n := int32(6)
	p := &durablev1.OptionsPatch{MaxAttempts: &n, StartToCloseTimeout: durationpb.New(30 * time.Second),
		NonRetryable: &durablev1.StringList{Values: []string{"A", "B"}}}
	if got, want := patchText(p), `max-attempts=6 non-retryable="A,B" start-to-close=30s`; got != want {
		t.Errorf("patchText = %q, want %q", got, want)
	}
	if got := patchText(&durablev1.OptionsPatch{}); got != "-" {
		t.Errorf("patchText of an empty patch = %q", got)
	}
}

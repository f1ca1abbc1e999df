package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestPatchFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want *durablev1.OptionsPatch
		text string
		err  bool
	}{
		{"None", nil, nil, "", false},
		{"Every", []string{"--initial", "1.5s", "--backoff", "1.5", "--max-interval", "1m", "--max-attempts", "8", "--non-retryable", "A, B",
			"--start-to-close", "30s", "--heartbeat-timeout", "5s", "--schedule-to-close", "1h"},
			&durablev1.OptionsPatch{InitialMs: ptr(int64(1500)), Backoff: ptr(1.5), MaxIntervalMs: ptr(int64(60000)), MaxAttempts: ptr(int32(8)),
				NonRetryable: &durablev1.StringList{Values: []string{"A", "B"}}, StartToCloseTimeout: durationpb.New(30 * time.Second),
				HeartbeatTimeout: durationpb.New(5 * time.Second), ScheduleToCloseTimeout: durationpb.New(time.Hour)},
			`--initial 1.5s --backoff 1.5 --max-interval 1m0s --max-attempts 8 --non-retryable "A,B" --start-to-close 30s --heartbeat-timeout 5s --schedule-to-close 1h0m0s`, false},
		// Zero is a value, the default: only flags not given stay unset.
		{"ZeroMeansTheDefault", []string{"--max-attempts", "0", "--heartbeat-timeout", "0s"},
			&durablev1.OptionsPatch{MaxAttempts: ptr(int32(0)), HeartbeatTimeout: durationpb.New(0)}, "--max-attempts 0 --heartbeat-timeout 0s", false},
		{"EmptyListClears", []string{"--non-retryable", ""},
			&durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{}}}, `--non-retryable ""`, false},
		{"NegativeDuration", []string{"--initial", "-1s"}, nil, "", true},
		{"NegativeAttempts", []string{"--max-attempts", "-2"}, nil, "", true},
		{"InfiniteBackoff", []string{"--backoff", "+Inf"}, nil, "", true},
		{"EmptyType", []string{"--non-retryable", "A,"}, nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			p := registerPatchFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := p.patch()
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want an error: %v", err, tt.err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("patch = %v, want %v", got, tt.want)
			}
			if s := patchText(got); s != tt.text {
				t.Errorf("patchText = %q, want %q", s, tt.text)
			}
		})
	}
}

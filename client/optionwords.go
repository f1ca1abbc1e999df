package client

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// OptionWordNames are the words ParseOptionWords reads, named like wf's
// option flags (--max-attempts and max-attempts= are one field).
var OptionWordNames = []string{
	"initial", "backoff", "max-interval", "max-attempts", "non-retryable",
	"start-to-close", "heartbeat-timeout", "schedule-to-close",
}

// ParseOptionWords reads a line of option words, such as
// "max-attempts=8 initial=30s start-to-close=2m", into the OptionsPatch
// that sets exactly those fields. Each word is name=value (a leading "--"
// is allowed); durations are Go durations, non-retryable a comma-separated
// list ("non-retryable=" clears it). The error names the word it cannot
// read. An empty line is an error: a patch must set something.
func ParseOptionWords(line string) (*durablev1.OptionsPatch, error) {
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil, fmt.Errorf("no option words: give one or more of %s", strings.Join(OptionWordNames, "=, ")+"=")
	}
	var p durablev1.OptionsPatch
	for _, w := range words {
		name, value, ok := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=value", w)
		}
		if err := setOptionWord(&p, name, value); err != nil {
			return nil, fmt.Errorf("%q: %w", w, err)
		}
	}
	return &p, nil
}

func setOptionWord(p *durablev1.OptionsPatch, name, value string) error {
	dur := func() (time.Duration, error) {
		d, err := time.ParseDuration(value)
		if err != nil {
			return 0, fmt.Errorf("not a duration (e.g. 30s, 2m)")
		}
		if d < 0 {
			return 0, fmt.Errorf("must not be negative")
		}
		return d, nil
	}
	ms := func() (*int64, error) {
		d, err := dur()
		if err != nil {
			return nil, err
		}
		if d%time.Millisecond != 0 {
			return nil, fmt.Errorf("must be a whole number of milliseconds")
		}
		v := d.Milliseconds()
		return &v, nil
	}
	span := func() (*durationpb.Duration, error) {
		d, err := dur()
		if err != nil {
			return nil, err
		}
		return durationpb.New(d), nil
	}
	var err error
	switch name {
	case "initial":
		p.InitialMs, err = ms()
	case "max-interval":
		p.MaxIntervalMs, err = ms()
	case "backoff":
		f, perr := strconv.ParseFloat(value, 64)
		if perr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("not a finite number")
		}
		p.Backoff = &f
	case "max-attempts":
		n, perr := strconv.ParseInt(value, 10, 32)
		if perr != nil || n < 0 {
			return fmt.Errorf("want 0 (the daemon's default) or a whole number above it")
		}
		v := int32(n)
		p.MaxAttempts = &v
	case "non-retryable":
		list := []string{}
		for _, part := range strings.Split(value, ",") {
			if part = strings.TrimSpace(part); part != "" {
				list = append(list, part)
			}
		}
		p.NonRetryable = &durablev1.StringList{Values: list}
	case "start-to-close":
		p.StartToCloseTimeout, err = span()
	case "heartbeat-timeout":
		p.HeartbeatTimeout, err = span()
	case "schedule-to-close":
		p.ScheduleToCloseTimeout, err = span()
	default:
		return fmt.Errorf("unknown option (known: %s)", strings.Join(OptionWordNames, ", "))
	}
	return err
}

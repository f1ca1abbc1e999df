package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The flags that change activity options, shared by every command that
// edits them ('wf policy set', 'wf dlq redrive'), so a field has one flag
// name and one meaning everywhere. Only the flags given are set in the
// patch: an absent flag leaves the field as the code (or the letter) has it,
// which is not the same as giving it its zero value.

// patchFlagsHelp lists the flags for a command's usage text.
const patchFlagsHelp = `  --initial DUR            backoff after the first failure (retry_policy.initial_ms)
  --backoff F              growth factor of the backoff; below 1 means the default 2
  --max-interval DUR       cap on a single backoff
  --max-attempts N         the attempt whose failure dead-letters (0: the daemon's default)
  --non-retryable T,...    failure types never retried; "" clears the list
  --start-to-close DUR     how long one attempt may run
  --heartbeat-timeout DUR  an attempt must heartbeat this often (0: no heartbeat needed)
  --schedule-to-close DUR  budget for all attempts and waits (0: no budget)
`

// patchFlags are the option flags of one command.
type patchFlags struct {
	fs *flag.FlagSet

	initial, maxInterval                            time.Duration
	startToClose, heartbeatTimeout, scheduleToClose time.Duration
	backoff                                         float64
	maxAttempts                                     int
	nonRetryable                                    string
}

// patchFlagNames are the names registerPatchFlags adds, in the order of
// patchFlagsHelp.
var patchFlagNames = []string{
	"initial", "backoff", "max-interval", "max-attempts", "non-retryable",
	"start-to-close", "heartbeat-timeout", "schedule-to-close",
}

// registerPatchFlags adds the option flags to fs.
func registerPatchFlags(fs *flag.FlagSet) *patchFlags {
	p := &patchFlags{fs: fs}
	fs.DurationVar(&p.initial, "initial", 0, "backoff after the first failure")
	fs.Float64Var(&p.backoff, "backoff", 0, "growth factor of the backoff (below 1: the default 2)")
	fs.DurationVar(&p.maxInterval, "max-interval", 0, "cap on a single backoff")
	fs.IntVar(&p.maxAttempts, "max-attempts", 0, "the attempt whose failure dead-letters (0: the daemon's default)")
	fs.StringVar(&p.nonRetryable, "non-retryable", "", `failure types never retried, comma-separated ("" clears them)`)
	fs.DurationVar(&p.startToClose, "start-to-close", 0, "how long one attempt may run")
	fs.DurationVar(&p.heartbeatTimeout, "heartbeat-timeout", 0, "how often an attempt must heartbeat (0: not at all)")
	fs.DurationVar(&p.scheduleToClose, "schedule-to-close", 0, "budget for all attempts and waits (0: none)")
	return p
}

// given reports whether any option flag was given.
func (p *patchFlags) given() bool {
	found := false
	p.fs.Visit(func(f *flag.Flag) {
		for _, n := range patchFlagNames {
			found = found || f.Name == n
		}
	})
	return found
}

// patch returns the OptionsPatch of the flags given (nil when none was),
// or an error naming the flag whose value cannot be sent.
func (p *patchFlags) patch() (*durablev1.OptionsPatch, error) {
	var out durablev1.OptionsPatch
	set := false
	var err error
	p.fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "initial":
			var ms int64
			if ms, err = millis("--initial", p.initial); err == nil {
				out.InitialMs = &ms
			}
		case "backoff":
			if math.IsNaN(p.backoff) || math.IsInf(p.backoff, 0) {
				err = fmt.Errorf("--backoff must be a finite number, got %v", p.backoff)
				return
			}
			b := p.backoff
			out.Backoff = &b
		case "max-interval":
			var ms int64
			if ms, err = millis("--max-interval", p.maxInterval); err == nil {
				out.MaxIntervalMs = &ms
			}
		case "max-attempts":
			if p.maxAttempts < 0 || p.maxAttempts > math.MaxInt32 {
				err = fmt.Errorf("--max-attempts must be 0 (the daemon's default) or more, got %d", p.maxAttempts)
				return
			}
			n := int32(p.maxAttempts)
			out.MaxAttempts = &n
		case "non-retryable":
			out.NonRetryable = &durablev1.StringList{Values: splitList(p.nonRetryable)}
		case "start-to-close":
			out.StartToCloseTimeout, err = span("--start-to-close", p.startToClose)
		case "heartbeat-timeout":
			out.HeartbeatTimeout, err = span("--heartbeat-timeout", p.heartbeatTimeout)
		case "schedule-to-close":
			out.ScheduleToCloseTimeout, err = span("--schedule-to-close", p.scheduleToClose)
		default:
			return
		}
		set = true
	})
	if err != nil || !set {
		return nil, err
	}
	return &out, nil
}

// millis is d in whole milliseconds, the unit of the retry policy's spans.
func millis(name string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("%s must not be negative, got %s", name, d)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%s must be a whole number of milliseconds, got %s", name, d)
	}
	return d.Milliseconds(), nil
}

func span(name string, d time.Duration) (*durationpb.Duration, error) {
	if d < 0 {
		return nil, fmt.Errorf("%s must not be negative, got %s", name, d)
	}
	return durationpb.New(d), nil
}

// splitList splits a comma-separated flag value, dropping empty items, so
// that "" is the empty list.
func splitList(s string) []string {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// patchText writes the fields a patch sets the way the flags spell them:
// "max-attempts=6 start-to-close=30s"; "-" when it sets nothing.
func patchText(p *durablev1.OptionsPatch) string {
	if p == nil {
		return "-"
	}
	var parts []string
	add := func(name, value string) { parts = append(parts, name+"="+value) }
	if p.InitialMs != nil {
		add("initial", human(time.Duration(p.GetInitialMs())*time.Millisecond))
	}
	if p.Backoff != nil {
		add("backoff", strconv.FormatFloat(p.GetBackoff(), 'g', -1, 64))
	}
	if p.MaxIntervalMs != nil {
		add("max-interval", human(time.Duration(p.GetMaxIntervalMs())*time.Millisecond))
	}
	if p.MaxAttempts != nil {
		add("max-attempts", strconv.Itoa(int(p.GetMaxAttempts())))
	}
	if p.NonRetryable != nil {
		add("non-retryable", `"`+strings.Join(p.GetNonRetryable().GetValues(), ",")+`"`)
	}
	if p.StartToCloseTimeout != nil {
		add("start-to-close", human(p.GetStartToCloseTimeout().AsDuration()))
	}
	if p.HeartbeatTimeout != nil {
		add("heartbeat-timeout", human(p.GetHeartbeatTimeout().AsDuration()))
	}
	if p.ScheduleToCloseTimeout != nil {
		add("schedule-to-close", human(p.GetScheduleToCloseTimeout().AsDuration()))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// patchFlags are the flags that change an activity's retry policy and
// timeouts: an edit of a redrive (wf dlq redrive) and a policy override
// (wf policy set) take the same ones, and they mean what an OptionsPatch
// means. Only the flags given are set in the patch; a flag given as 0 (or
// --non-retryable "") sets the field to its zero, which means the default.
type patchFlags struct {
	fs           *flag.FlagSet
	initial      time.Duration
	backoff      float64
	maxInterval  time.Duration
	maxAttempts  int
	nonRetryable string
	startToClose time.Duration
	heartbeat    time.Duration
	schedToClose time.Duration
}

// patchFlagNames are the flags of registerPatchFlags, in the order help
// texts and the rendering of a patch name them.
var patchFlagNames = []string{
	"initial", "backoff", "max-interval", "max-attempts", "non-retryable",
	"start-to-close", "heartbeat-timeout", "schedule-to-close",
}

// registerPatchFlags registers the patch flags on fs.
func registerPatchFlags(fs *flag.FlagSet) *patchFlags {
	p := &patchFlags{fs: fs}
	fs.DurationVar(&p.initial, "initial", 0, "set the backoff after the first failed attempt")
	fs.Float64Var(&p.backoff, "backoff", 0, "set the growth factor of the backoff (below 1: the default, 2)")
	fs.DurationVar(&p.maxInterval, "max-interval", 0, "set the cap on one backoff")
	fs.IntVar(&p.maxAttempts, "max-attempts", 0, "set the attempt whose failure dead-letters it (0: the daemon's default)")
	fs.StringVar(&p.nonRetryable, "non-retryable", "", `set the failure types never retried, comma-separated ("" clears them)`)
	fs.DurationVar(&p.startToClose, "start-to-close", 0, "set how long one attempt may run")
	fs.DurationVar(&p.heartbeat, "heartbeat-timeout", 0, "set how often a running attempt must heartbeat (0: no heartbeat)")
	fs.DurationVar(&p.schedToClose, "schedule-to-close", 0, "set the budget for all attempts together (0: none)")
	return p
}

// given reports whether any patch flag was given.
func (p *patchFlags) given() bool {
	n := 0
	p.visit(func(string) { n++ })
	return n > 0
}

func (p *patchFlags) visit(fn func(name string)) {
	p.fs.Visit(func(f *flag.Flag) {
		for _, name := range patchFlagNames {
			if f.Name == name {
				fn(name)
			}
		}
	})
}

// patch returns the OptionsPatch the given flags make, nil when none was
// given. An error names the flag and is a usage error.
func (p *patchFlags) patch() (*durablev1.OptionsPatch, error) {
	if !p.given() {
		return nil, nil
	}
	out := &durablev1.OptionsPatch{}
	var err error
	span := func(name string, d time.Duration) *durationpb.Duration {
		if d < 0 && err == nil {
			err = fmt.Errorf("--%s must not be negative, got %s", name, d)
		}
		return durationpb.New(d)
	}
	p.visit(func(name string) {
		switch name {
		case "initial":
			out.InitialMs = ptr(span(name, p.initial).AsDuration().Milliseconds())
		case "backoff":
			if math.IsNaN(p.backoff) || math.IsInf(p.backoff, 0) {
				err = errors.New("--backoff must be a finite number")
			}
			out.Backoff = ptr(p.backoff)
		case "max-interval":
			out.MaxIntervalMs = ptr(span(name, p.maxInterval).AsDuration().Milliseconds())
		case "max-attempts":
			if p.maxAttempts < 0 || p.maxAttempts > math.MaxInt32 {
				err = fmt.Errorf("--max-attempts must be 0 (the daemon's default) or more, got %d", p.maxAttempts)
			}
			out.MaxAttempts = ptr(int32(p.maxAttempts))
		case "non-retryable":
			out.NonRetryable = &durablev1.StringList{Values: []string{}}
			if strings.TrimSpace(p.nonRetryable) == "" {
				break
			}
			for _, t := range strings.Split(p.nonRetryable, ",") {
				if t = strings.TrimSpace(t); t == "" {
					err = fmt.Errorf("--non-retryable %q has an empty failure type", p.nonRetryable)
				}
				out.NonRetryable.Values = append(out.NonRetryable.Values, t)
			}
		case "start-to-close":
			out.StartToCloseTimeout = span(name, p.startToClose)
		case "heartbeat-timeout":
			out.HeartbeatTimeout = span(name, p.heartbeat)
		case "schedule-to-close":
			out.ScheduleToCloseTimeout = span(name, p.schedToClose)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// patchText renders a patch the way the flags spell it, for tables and
// messages: "--max-attempts 8 --start-to-close 30s"; "" for none.
func patchText(p *durablev1.OptionsPatch) string {
	if p == nil {
		return ""
	}
	var parts []string
	add := func(name, value string) { parts = append(parts, "--"+name+" "+value) }
	ms := func(n int64) string { return (time.Duration(n) * time.Millisecond).String() }
	if p.InitialMs != nil {
		add("initial", ms(p.GetInitialMs()))
	}
	if p.Backoff != nil {
		add("backoff", strconv.FormatFloat(p.GetBackoff(), 'f', -1, 64))
	}
	if p.MaxIntervalMs != nil {
		add("max-interval", ms(p.GetMaxIntervalMs()))
	}
	if p.MaxAttempts != nil {
		add("max-attempts", strconv.Itoa(int(p.GetMaxAttempts())))
	}
	if p.NonRetryable != nil {
		add("non-retryable", strconv.Quote(strings.Join(p.GetNonRetryable().GetValues(), ",")))
	}
	if p.StartToCloseTimeout != nil {
		add("start-to-close", p.GetStartToCloseTimeout().AsDuration().String())
	}
	if p.HeartbeatTimeout != nil {
		add("heartbeat-timeout", p.GetHeartbeatTimeout().AsDuration().String())
	}
	if p.ScheduleToCloseTimeout != nil {
		add("schedule-to-close", p.GetScheduleToCloseTimeout().AsDuration().String())
	}
	return strings.Join(parts, " ")
}

package server

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Bounds on request fields. They are generous for real use and exist so a
// buggy or hostile client cannot make the engine store or compute absurd
// values.
const (
	// maxIDLen bounds ids, types, queue names and identities, in bytes.
	maxIDLen = activity.MaxIDLen
	// maxDuration bounds every timeout and timer: 10 years.
	maxDuration = 10 * 365 * 24 * time.Hour
	// maxAttempts bounds RetryPolicy.max_attempts.
	maxAttempts = 10000
	// maxPageSize bounds page_size of the list calls.
	maxPageSize = 1000
	// maxPollTasks bounds PollActivityTaskRequest.max_tasks.
	maxPollTasks = 100
	// maxCommands bounds the commands of one workflow task completion.
	maxCommands = 1000
	// maxNonRetryable bounds RetryPolicy.non_retryable.
	maxNonRetryable = 100
	// maxTokenLen bounds task tokens and page tokens: room for two ids, a
	// principal, a few integers and a MAC.
	maxTokenLen = 4 * maxIDLen
	// maxReasonLen bounds the reason an operator gives for an action.
	maxReasonLen = 2000
	// maxRedriveList bounds the activities one bulk redrive lists.
	maxRedriveList = 100000
	// maxRedriveRate bounds the letters per second of a bulk redrive.
	maxRedriveRate = 100000
)

// validator checks one request against the payload bound. Its methods take
// the field path as spelled in durable.proto and return a *fieldError naming
// it. Every method accepts nil messages, which read as their zero value.
type validator struct {
	maxPayload int
}

func field(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func index(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

func invalidf(path, format string, args ...any) error {
	return &fieldError{field: path, reason: fmt.Sprintf(format, args...)}
}

// Two rules for ids. A new id — one this request would store for the first
// time, such as the workflow id of StartWorkflow or the activity id of a
// schedule command — must be plain text (activity.CheckID): no control,
// format, private-use or unassigned characters, no spaces but U+0020 and
// none at either end. A reference to an id that may already be stored — the
// workflow id of DescribeWorkflow, the ids of a redrive, a filter, the queue
// a worker polls — is held only to the rule that was in force when older
// data was written (bounded UTF-8 without control characters), so that work
// stored before the stricter rule can still be read, polled and redriven.

// id checks a required new id.
func (v validator) id(path, s string) error {
	if err := activity.CheckID(s); err != nil {
		return invalidf(path, "%s", err.Error())
	}
	return nil
}

// optionalID checks a new id that may be left empty.
func (v validator) optionalID(path, s string) error {
	if s == "" {
		return nil
	}
	return v.id(path, s)
}

// ref checks a required reference to an id that may already be stored.
func (v validator) ref(path, s string) error {
	if s == "" {
		return invalidf(path, "is required")
	}
	return v.text(path, s)
}

// text checks an optional reference or filter: bounded, UTF-8, and free of
// control characters, the rule ids were written under before CheckID.
func (v validator) text(path, s string) error {
	if len(s) > maxIDLen {
		return invalidf(path, "must be at most %d bytes, got %d", maxIDLen, len(s))
	}
	return v.textUnbounded(path, s)
}

// textUnbounded checks that s is UTF-8 without control characters.
func (v validator) textUnbounded(path, s string) error {
	if !utf8.ValidString(s) {
		return invalidf(path, "must be valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalidf(path, "must not contain control characters")
		}
	}
	return nil
}

// payload checks opaque bytes against MaxPayload.
func (v validator) payload(path string, n int) error {
	if n > v.maxPayload {
		return invalidf(path, "must be at most %d bytes, got %d", v.maxPayload, n)
	}
	return nil
}

// duration checks an optional span: unset is fine, otherwise a valid
// Duration in [0, 10 years].
func (v validator) duration(path string, d *durationpb.Duration) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return invalidf(path, "is not a valid duration (seconds %d, nanos %d)", d.GetSeconds(), d.GetNanos())
	}
	switch dur := d.AsDuration(); {
	case dur < 0:
		return invalidf(path, "must be >= 0, got %s", dur)
	case dur > maxDuration:
		return invalidf(path, "must be at most %s (10 years), got %s", maxDuration, dur)
	}
	return nil
}

// millis checks a span in milliseconds: [0, 10 years].
func (v validator) millis(path string, ms int64) error {
	if ms < 0 {
		return invalidf(path, "must be >= 0, got %d", ms)
	}
	if ms > maxDuration.Milliseconds() {
		return invalidf(path, "must be at most %d (10 years), got %d", maxDuration.Milliseconds(), ms)
	}
	return nil
}

func (v validator) pageSize(path string, n int32) error {
	if n < 0 || n > maxPageSize {
		return invalidf(path, "must be in [0, %d], got %d", maxPageSize, n)
	}
	return nil
}

func (v validator) pageToken(path string, b []byte) error {
	if len(b) > maxTokenLen {
		return invalidf(path, "must be at most %d bytes, got %d", maxTokenLen, len(b))
	}
	return nil
}

// taskToken checks that a task token is present and not absurdly long; its
// seal and contents are checked by open and the engine.
func (v validator) taskToken(path string, b []byte) error {
	if len(b) == 0 {
		return invalidf(path, "is required")
	}
	if len(b) > maxTokenLen {
		return invalidf(path, "is malformed: longer than %d bytes", maxTokenLen)
	}
	return nil
}

// reason checks an operator's reason: optional, bounded, printable text.
func (v validator) reason(path, s string) error {
	if len(s) > maxReasonLen {
		return invalidf(path, "must be at most %d bytes, got %d", maxReasonLen, len(s))
	}
	return v.textUnbounded(path, s)
}

// failure checks an optional Failure.
func (v validator) failure(path string, f *durablev1.Failure) error {
	if f == nil {
		return nil
	}
	if err := v.optionalID(field(path, "type"), f.GetType()); err != nil {
		return err
	}
	if len(f.GetMessage()) > v.maxPayload {
		return v.payload(field(path, "message"), len(f.GetMessage()))
	}
	if !utf8.ValidString(f.GetMessage()) {
		return invalidf(field(path, "message"), "must be valid UTF-8")
	}
	return v.payload(field(path, "details"), len(f.GetDetails()))
}

// retryPolicy checks an optional RetryPolicy. Zero fields mean defaults and
// are fine; a backoff below 1, negative ones included, counts as unset (the
// default 2.0, as the specification says), so only NaN and infinities are
// refused: they are not numbers a policy could mean.
func (v validator) retryPolicy(path string, p *durablev1.RetryPolicy) error {
	if p == nil {
		return nil
	}
	if err := v.millis(field(path, "initial_ms"), p.GetInitialMs()); err != nil {
		return err
	}
	if b := p.GetBackoff(); math.IsNaN(b) || math.IsInf(b, 0) {
		return invalidf(field(path, "backoff"), "must be a finite number (a factor below 1 means the default), got %v", b)
	}
	if err := v.millis(field(path, "max_interval_ms"), p.GetMaxIntervalMs()); err != nil {
		return err
	}
	if n := p.GetMaxAttempts(); n < 0 || n > maxAttempts {
		return invalidf(field(path, "max_attempts"), "must be in [0, %d], got %d", maxAttempts, n)
	}
	if n := len(p.GetNonRetryable()); n > maxNonRetryable {
		return invalidf(field(path, "non_retryable"), "must have at most %d entries, got %d", maxNonRetryable, n)
	}
	for i, t := range p.GetNonRetryable() {
		if err := v.id(index(field(path, "non_retryable"), i), t); err != nil {
			return err
		}
	}
	return nil
}

// activityOptions checks optional ActivityOptions.
func (v validator) activityOptions(path string, o *durablev1.ActivityOptions) error {
	if o == nil {
		return nil
	}
	if err := v.optionalID(field(path, "task_queue"), o.GetTaskQueue()); err != nil {
		return err
	}
	durations := []struct {
		name string
		d    *durationpb.Duration
	}{
		{"start_to_close_timeout", o.GetStartToCloseTimeout()},
		{"heartbeat_timeout", o.GetHeartbeatTimeout()},
		{"schedule_to_start_timeout", o.GetScheduleToStartTimeout()},
		{"schedule_to_close_timeout", o.GetScheduleToCloseTimeout()},
	}
	for _, d := range durations {
		if err := v.duration(field(path, d.name), d.d); err != nil {
			return err
		}
	}
	return v.retryPolicy(field(path, "retry_policy"), o.GetRetryPolicy())
}

// optionsPatch checks an optional OptionsPatch field by field, with the
// bounds of a schedule's options: the values a patch sets must be values a
// workflow could have scheduled.
func (v validator) optionsPatch(path string, p *durablev1.OptionsPatch) error {
	if p == nil {
		return nil
	}
	if p.InitialMs != nil {
		if err := v.millis(field(path, "initial_ms"), p.GetInitialMs()); err != nil {
			return err
		}
	}
	if p.Backoff != nil {
		if b := p.GetBackoff(); math.IsNaN(b) || math.IsInf(b, 0) {
			return invalidf(field(path, "backoff"), "must be a finite number (a factor below 1 means the default), got %v", b)
		}
	}
	if p.MaxIntervalMs != nil {
		if err := v.millis(field(path, "max_interval_ms"), p.GetMaxIntervalMs()); err != nil {
			return err
		}
	}
	if p.MaxAttempts != nil {
		if n := p.GetMaxAttempts(); n < 0 || n > maxAttempts {
			return invalidf(field(path, "max_attempts"), "must be in [0, %d], got %d", maxAttempts, n)
		}
	}
	if p.NonRetryable != nil {
		list := p.GetNonRetryable().GetValues()
		if len(list) > maxNonRetryable {
			return invalidf(field(path, "non_retryable"), "must have at most %d entries, got %d", maxNonRetryable, len(list))
		}
		for i, t := range list {
			if err := v.id(index(field(path, "non_retryable.values"), i), t); err != nil {
				return err
			}
		}
	}
	for _, d := range []struct {
		name string
		d    *durationpb.Duration
	}{
		{"start_to_close_timeout", p.GetStartToCloseTimeout()},
		{"heartbeat_timeout", p.GetHeartbeatTimeout()},
		{"schedule_to_close_timeout", p.GetScheduleToCloseTimeout()},
	} {
		if err := v.duration(field(path, d.name), d.d); err != nil {
			return err
		}
	}
	return nil
}

// edit checks an optional edit of a redrive: a valid patch that changes
// something (an edit that sets no field is a mistake, not a no-op).
func (v validator) edit(path string, p *durablev1.OptionsPatch) error {
	if p == nil {
		return nil
	}
	if !patchSetsSomething(p) {
		return invalidf(path, "sets no field; leave it out to redrive with the options as they are")
	}
	return v.optionsPatch(path, p)
}

// patchSetsSomething reports whether p sets at least one field.
func patchSetsSomething(p *durablev1.OptionsPatch) bool {
	return p.InitialMs != nil || p.Backoff != nil || p.MaxIntervalMs != nil || p.MaxAttempts != nil ||
		p.NonRetryable != nil || p.StartToCloseTimeout != nil || p.HeartbeatTimeout != nil || p.ScheduleToCloseTimeout != nil
}

// fingerprint checks an optional failure fingerprint: the hex digits
// activity.Fingerprint returns, so that a mistyped or cut one is an error
// rather than a filter that silently matches nothing.
func (v validator) fingerprint(path, s string) error {
	if s == "" {
		return nil
	}
	if len(s) != activity.FingerprintLen {
		return invalidf(path, "must be %d hex digits (as wf dlq list --group prints it), got %d characters", activity.FingerprintLen, len(s))
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return invalidf(path, "must be %d lower-case hex digits, got %q", activity.FingerprintLen, s)
		}
	}
	return nil
}

// timeRange checks two optional bounds of a span of time: each a valid
// timestamp, and the end after the start when both are set.
func (v validator) timeRange(fromPath string, from *timestamppb.Timestamp, beforePath string, before *timestamppb.Timestamp) error {
	if from != nil && from.CheckValid() != nil {
		return invalidf(fromPath, "is not a valid timestamp")
	}
	if before != nil && before.CheckValid() != nil {
		return invalidf(beforePath, "is not a valid timestamp")
	}
	if from != nil && before != nil && !before.AsTime().After(from.AsTime()) {
		return invalidf(beforePath, "must be later than %s (%s), got %s", fromPath,
			from.AsTime().UTC().Format(time.RFC3339Nano), before.AsTime().UTC().Format(time.RFC3339Nano))
	}
	return nil
}

package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

var ops = engine.Actor{Principal: "ops", Role: "operator"}

// setOverride overrides the activity type Charge (the harness's) on queue
// ("" for every queue) with p.
func (h *harness) setOverride(queue string, p *durablev1.OptionsPatch) *durablev1.PolicyOverride {
	h.t.Helper()
	o, err := h.e.SetPolicyOverride(context.Background(), ops, &durablev1.SetPolicyOverrideRequest{
		ActivityType: "Charge", TaskQueue: queue, Patch: p, Reason: "INC-7: card API slow",
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return o
}

func (h *harness) clearOverride(queue string) *durablev1.ClearPolicyOverrideResponse {
	h.t.Helper()
	r, err := h.e.ClearPolicyOverride(context.Background(), ops, &durablev1.ClearPolicyOverrideRequest{ActivityType: "Charge", TaskQueue: queue, Reason: "INC-7 over"})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// only returns the one pending activity of wf.
func (h *harness) only(wf string) *durablev1.PendingActivity {
	h.t.Helper()
	acts := h.describe(wf).GetPendingActivities()
	if len(acts) != 1 {
		h.t.Fatalf("%s has %d pending activities, want 1", wf, len(acts))
	}
	return acts[0]
}

func (h *harness) wantState(wf string, want durablev1.ActivityState) *durablev1.PendingActivity {
	h.t.Helper()
	a := h.only(wf)
	if a.GetState() != want {
		h.t.Fatalf("%s at t0+%v: state %v, want %v (last failure %v)", wf, h.clock.Now().Sub(t0), a.GetState(), want, a.GetLastFailure())
	}
	return a
}

const (
	started  = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	retrying = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	dead     = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
	sched    = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
)

// TestOverrideShortensARunningLease: a start-to-close override below the
// code's ends an attempt already running at its new deadline, not the old.
func TestOverrideShortensARunningLease(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 3}})
	task := h.pollActivity()
	h.clock.Advance(10 * time.Second)
	h.setOverride("", &durablev1.OptionsPatch{StartToCloseTimeout: dur(20 * time.Second)})

	a := h.wantState("wf", started)
	checkTime(t, "lease deadline in force", a.GetLeaseDeadline(), 20*time.Second)
	if got := a.GetOptions().GetStartToCloseTimeout().AsDuration(); got != time.Minute {
		t.Errorf("the code's start-to-close shows as %v, want 1m", got)
	}
	if !slices.Equal(a.GetOverriddenFields(), []string{"start_to_close_timeout"}) {
		t.Errorf("overridden fields = %q", a.GetOverriddenFields())
	}
	h.clock.Advance(10*time.Second - time.Millisecond)
	h.wantState("wf", started)
	h.clock.Advance(time.Millisecond)
	a = h.wantState("wf", retrying)
	if f := a.GetLastFailure(); f.GetType() != engine.TimeoutStartToClose || !strings.Contains(f.GetMessage(), "20s") {
		t.Errorf("failure = %v, want a StartToCloseTimeout naming 20s", f)
	}
	if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("completing the cut-off attempt: err = %v, want ErrStaleTask", err)
	}
}

// TestOverrideLengthensARunningLease: a longer start-to-close keeps an
// attempt already running past its old deadline.
func TestOverrideLengthensARunningLease(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(10 * time.Second)})
	task := h.pollActivity()
	if !task.GetDeadline().AsTime().Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("deadline before the override = %v", task.GetDeadline().AsTime())
	}
	h.clock.Advance(5 * time.Second)
	h.setOverride("", &durablev1.OptionsPatch{StartToCloseTimeout: dur(time.Minute)})
	h.clock.Advance(5 * time.Second)
	a := h.wantState("wf", started)
	checkTime(t, "lease deadline", a.GetLeaseDeadline(), time.Minute)
	h.clock.Advance(50*time.Second - time.Millisecond)
	h.wantState("wf", started)
	h.clock.Advance(time.Millisecond)
	h.wantState("wf", retrying)
}

// TestOverrideHeartbeatTimeoutOnARunningLease: a heartbeat timeout set by
// an override applies to the attempt running, from its start or its last
// heartbeat.
func TestOverrideHeartbeatTimeoutOnARunningLease(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Hour)})
	task := h.pollActivity()
	h.clock.Advance(time.Second)
	h.setOverride("", &durablev1.OptionsPatch{HeartbeatTimeout: dur(5 * time.Second)})
	checkTime(t, "deadline before a heartbeat", h.only("wf").GetLeaseDeadline(), 5*time.Second)
	h.clock.Advance(3 * time.Second)
	resp, err := h.e.RecordHeartbeat(context.Background(), &durablev1.HeartbeatRequest{TaskToken: task.GetTaskToken(), Details: []byte(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	checkTime(t, "deadline the heartbeat returns", resp.GetDeadline(), 9*time.Second)
	h.clock.Advance(5*time.Second - time.Millisecond)
	h.wantState("wf", started)
	h.clock.Advance(time.Millisecond)
	if f := h.wantState("wf", retrying).GetLastFailure(); f.GetType() != engine.TimeoutHeartbeat {
		t.Errorf("failure = %v, want HeartbeatTimeout", f)
	}
}

// TestOverrideScheduleToCloseBudget: a budget set by an override reaches an
// activity waiting in its queue, which had none; clearing it removes it.
func TestOverrideScheduleToCloseBudget(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", nil)
	h.clock.Advance(10 * time.Second)
	h.setOverride("", &durablev1.OptionsPatch{ScheduleToCloseTimeout: dur(30 * time.Second)})
	checkTime(t, "expiration", h.only("wf").GetExpirationTime(), 30*time.Second)
	h.clock.Advance(20 * time.Second)
	if f := h.wantState("wf", dead).GetLastFailure(); f.GetType() != engine.TimeoutScheduleToClose || !strings.Contains(f.GetMessage(), "30s") {
		t.Errorf("failure = %v, want a ScheduleToCloseTimeout naming 30s", f)
	}

	h.startWithActivity("wf-2", nil)
	h.clock.Advance(10 * time.Second)
	h.clearOverride("")
	if exp := h.only("wf-2").GetExpirationTime(); exp != nil {
		t.Errorf("expiration after the clear = %v, want none", exp.AsTime())
	}
	h.clock.Advance(time.Hour)
	h.wantState("wf-2", sched)
}

// TestOverrideMaxAttemptsThenClear: an override of max attempts made while
// an activity retries decides when it dead-letters; clearing it gives new
// activities the code's number again.
func TestOverrideMaxAttemptsThenClear(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	opts := &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, MaxIntervalMs: 1000, MaxAttempts: 2}}
	h.startWithActivity("wf", opts)
	h.fail(h.pollActivity(), &durablev1.Failure{Type: "Flaky"})
	h.setOverride("", &durablev1.OptionsPatch{MaxAttempts: i32(4)})
	a := h.wantState("wf", retrying)
	if a.GetMaxAttempts() != 4 || !slices.Equal(a.GetOverriddenFields(), []string{"retry_policy.max_attempts"}) || a.GetOptions().GetRetryPolicy().GetMaxAttempts() != 2 {
		t.Fatalf("in force: max %d, fields %q, code's %d; want 4, the field, 2", a.GetMaxAttempts(), a.GetOverriddenFields(), a.GetOptions().GetRetryPolicy().GetMaxAttempts())
	}
	for attempt := int32(2); attempt <= 4; attempt++ {
		h.clock.Advance(time.Second)
		task := h.pollActivity()
		if task.GetAttempt() != attempt || task.GetMaxAttempts() != 4 {
			t.Fatalf("task = attempt %d of %d, want %d of 4", task.GetAttempt(), task.GetMaxAttempts(), attempt)
		}
		h.fail(task, &durablev1.Failure{Type: "Flaky"})
	}
	if got := h.wantState("wf", dead).GetAttempt(); got != 4 {
		t.Errorf("dead-lettered after attempt %d, want 4", got)
	}

	h.clearOverride("")
	h.startWithActivity("wf-2", opts)
	for range 2 {
		h.clock.Advance(time.Second)
		h.fail(h.pollActivity(), &durablev1.Failure{Type: "Flaky"})
	}
	if got := h.wantState("wf-2", dead); got.GetAttempt() != 2 || got.GetMaxAttempts() != 2 || len(got.GetOverriddenFields()) != 0 {
		t.Errorf("after the clear: dead at attempt %d of %d, fields %q; want 2 of 2, none", got.GetAttempt(), got.GetMaxAttempts(), got.GetOverriddenFields())
	}
	// The letter of the first keeps the code's number in its record.
	if got := h.only("wf").GetMaxAttempts(); got != 2 {
		t.Errorf("the first letter shows max %d after the clear, want the code's 2", got)
	}
}

// TestOverrideForAQueueWinsOverEveryQueue: an override for the type on the
// activity's queue wins over the one for the type alone.
func TestOverrideForAQueueWinsOverEveryQueue(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", nil)
	h.setOverride("", &durablev1.OptionsPatch{MaxAttempts: i32(6)})
	h.setOverride("other", &durablev1.OptionsPatch{MaxAttempts: i32(9)})
	if got := h.only("wf").GetMaxAttempts(); got != 6 {
		t.Errorf("with overrides for every queue and another queue: max %d, want 6", got)
	}
	h.setOverride("q", &durablev1.OptionsPatch{MaxAttempts: i32(3)})
	if got := h.only("wf").GetMaxAttempts(); got != 3 {
		t.Errorf("with an override for its queue: max %d, want 3", got)
	}
	h.clearOverride("q")
	if got := h.only("wf").GetMaxAttempts(); got != 6 {
		t.Errorf("after clearing its queue's: max %d, want 6", got)
	}
	list, err := h.e.ListPolicyOverrides(context.Background(), &durablev1.ListPolicyOverridesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list.GetOverrides() {
		keys = append(keys, o.GetActivityType()+"/"+o.GetTaskQueue())
	}
	if !slices.Equal(keys, []string{"Charge/", "Charge/other"}) {
		t.Errorf("overrides listed = %q", keys)
	}
}

// TestOverrideRefusals: a patch that sets nothing is invalid; clearing an
// override that is not set is not found.
func TestOverrideRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	_, err := h.e.SetPolicyOverride(context.Background(), ops, &durablev1.SetPolicyOverrideRequest{ActivityType: "Charge", Patch: &durablev1.OptionsPatch{}})
	var ie *engine.InvalidError
	if !errors.As(err, &ie) || ie.Field != "patch" {
		t.Errorf("empty patch: err = %v, want an InvalidError on patch", err)
	}
	_, err = h.e.ClearPolicyOverride(context.Background(), ops, &durablev1.ClearPolicyOverrideRequest{ActivityType: "Charge"})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("clearing no override: err = %v, want ErrNotFound", err)
	}
}

// TestOverrideAuditAndWatch: set and clear each write an audit record
// naming the override; watchers get the overrides in the snapshot, each
// change, and the new view of the activities it touches.
func TestOverrideAuditAndWatch(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := setup(t, engine.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h.startWithActivity("wf", nil)
	first := h.setOverride("", &durablev1.OptionsPatch{MaxAttempts: i32(6)})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *durablev1.WatchEvent, 100)
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		events <- ev
		return nil
	})
	next := func() *durablev1.WatchEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event within 10s")
			return nil
		}
	}
	var overrides []*durablev1.PolicyOverride
	var acts []*durablev1.PendingActivity
	for ev := next(); ev.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE; ev = next() {
		overrides = append(overrides, ev.GetPolicyOverrides()...)
		acts = append(acts, ev.GetActivities()...)
	}
	if len(overrides) != 1 || overrides[0].GetAuditId() != first.GetAuditId() {
		t.Fatalf("snapshot overrides = %v, want the one set", overrides)
	}
	if len(acts) != 1 || acts[0].GetMaxAttempts() != 6 || acts[0].GetOptionsInForce() == nil {
		t.Errorf("snapshot activities = %v; want one, with max 6 and the options in force", acts)
	}

	h.clearOverride("")
	var sawOverride, sawView bool
	for !sawOverride || !sawView {
		ev := next()
		for _, o := range ev.GetPolicyOverrides() {
			sawOverride = sawOverride || o.GetCleared() && o.GetActivityType() == "Charge"
		}
		for _, a := range ev.GetActivities() {
			sawView = sawView || a.GetMaxAttempts() == 5 && len(a.GetOverriddenFields()) == 0
		}
	}

	records := h.audit()
	if len(records) != 2 {
		t.Fatalf("%d audit records, want set and clear", len(records))
	}
	clear, set := records[0], records[1]
	if set.GetRpc() != "SetPolicyOverride" || set.GetPrincipal() != "ops" || set.GetReason() != "INC-7: card API slow" ||
		set.GetPolicyOverride().GetPatch().GetMaxAttempts() != 6 {
		t.Errorf("set record = %v", set)
	}
	if clear.GetRpc() != "ClearPolicyOverride" || !clear.GetPolicyOverride().GetCleared() || clear.GetReason() != "INC-7 over" {
		t.Errorf("clear record = %v", clear)
	}
	for _, want := range []string{
		`level=INFO msg="operator action" rpc=SetPolicyOverride principal=ops role=operator reason="INC-7: card API slow" activity_type=Charge task_queue="" fields=retry_policy.max_attempts`,
		`level=INFO msg="operator action" rpc=ClearPolicyOverride principal=ops role=operator reason="INC-7 over" activity_type=Charge task_queue="" fields=retry_policy.max_attempts audit_id=4`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOverrideSurvivesRestart: overrides are loaded at start, and the lease
// timers of a reopened store are where the override puts them.
func TestOverrideSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := engine.NewFakeClock(t0)
	open := func() (*harness, func()) {
		st, err := badgerstore.Open(dir, badgerstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(st, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }})
		if err != nil {
			t.Fatal(err)
		}
		return &harness{t: t, e: e, clock: clock}, func() { e.Close(); st.Close() }
	}
	h, closeFirst := open()
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Hour)})
	h.pollActivity()
	h.setOverride("", &durablev1.OptionsPatch{StartToCloseTimeout: dur(20 * time.Second)})
	closeFirst()

	h, closeSecond := open()
	defer closeSecond()
	list, err := h.e.ListPolicyOverrides(context.Background(), &durablev1.ListPolicyOverridesRequest{})
	if err != nil || len(list.GetOverrides()) != 1 {
		t.Fatalf("overrides after reopen = %v, %v", list.GetOverrides(), err)
	}
	checkTime(t, "lease deadline after reopen", h.wantState("wf", started).GetLeaseDeadline(), 20*time.Second)
	h.clock.Advance(20 * time.Second)
	h.wantState("wf", retrying)
}

// TestDeadLettersShowThePolicyInForce: ListDeadLetters names the options in
// force and where they come from, at the time of the call.
func TestDeadLettersShowThePolicyInForce(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("wf", "Flaky")
	list := func() *durablev1.PendingActivity {
		r, err := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{})
		if err != nil || len(r.GetDeadLetters()) != 1 {
			t.Fatalf("dead letters = %v, %v", r.GetDeadLetters(), err)
		}
		return r.GetDeadLetters()[0]
	}
	if a := list(); a.GetOptionsInForce() == nil || len(a.GetOverriddenFields()) != 0 {
		t.Errorf("without an override: in force %v, fields %q", a.GetOptionsInForce(), a.GetOverriddenFields())
	}
	h.setOverride("", &durablev1.OptionsPatch{InitialMs: i64(5000)})
	a := list()
	if a.GetOptionsInForce().GetRetryPolicy().GetInitialMs() != 5000 || !slices.Equal(a.GetOverriddenFields(), []string{"retry_policy.initial_ms"}) {
		t.Errorf("with an override: in force %v, fields %q", a.GetOptionsInForce(), a.GetOverriddenFields())
	}
}

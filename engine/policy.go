package engine

import (
	"cmp"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The policy in force. An activity record keeps the options its code gave
// (defaults filled in at scheduling) and never the override's: the override
// is applied afresh at each decision, so setting one reaches activities
// already pending from their next decision, and clearing one gives them their
// code's options back. InForce is that application, the one place the
// decisions (Decide, LeaseDeadline, the timers) and everything that shows an
// activity get the options from.

// PolicyDefaults are the daemon's values for option fields left at zero.
type PolicyDefaults struct {
	// MaxAttempts is the max_attempts of a policy that leaves it 0.
	MaxAttempts int32
	// StartToClose is the start-to-close timeout of an activity that has
	// none and no schedule-to-close budget either.
	StartToClose time.Duration
}

// InForce sets the fields of view that say how its next decision goes, from
// its code's options (view.options) and the override o (nil: none):
//   - options_in_force: the options with o's patch applied (ApplyPatch), a
//     zero start-to-close meaning the default, as at scheduling, and
//     retry_policy.max_attempts the number in force;
//   - overridden_fields: the paths of the fields o sets;
//   - max_attempts: o's (0 meaning the daemon's default) if it sets one;
//   - expiration_time: scheduled_time plus o's schedule-to-close if it sets
//     one (none for 0);
//   - lease_deadline, while an attempt runs: LeaseDeadline of the result.
//
// view must be the caller's own: a copy of a record, or a record read only to
// be shown. InForce reads no clock and no store.
func InForce(view *durablev1.PendingActivity, o *durablev1.PolicyOverride, d PolicyDefaults) {
	p := o.GetPatch()
	if p == nil {
		p = &durablev1.OptionsPatch{}
	}
	opts, fields := ApplyPatch(view.GetOptions(), p)
	fillStartToClose(opts, d.StartToClose)
	if p.MaxAttempts != nil {
		view.MaxAttempts = p.GetMaxAttempts()
		if view.MaxAttempts <= 0 {
			view.MaxAttempts = d.MaxAttempts
		}
	}
	if view.GetMaxAttempts() > 0 {
		if opts.RetryPolicy == nil {
			opts.RetryPolicy = &durablev1.RetryPolicy{}
		}
		opts.RetryPolicy.MaxAttempts = view.GetMaxAttempts()
	}
	if p.ScheduleToCloseTimeout != nil {
		view.ExpirationTime = nil
		if s := p.GetScheduleToCloseTimeout().AsDuration(); s > 0 && view.GetScheduledTime() != nil {
			view.ExpirationTime = ts(view.GetScheduledTime().AsTime().Add(s))
		}
	}
	view.OptionsInForce = opts
	view.OverriddenFields = fields
	if view.GetState() == stateStarted && view.GetLastStartedTime() != nil {
		deadline, _ := LeaseDeadline(view)
		view.LeaseDeadline = ts(deadline)
	}
}

// fillStartToClose gives options without a start-to-close timeout one: the
// schedule-to-close budget if they have one, else def. Scheduling, an edit
// and an override that sets it to 0 all fill it so.
func fillStartToClose(opts *durablev1.ActivityOptions, def time.Duration) {
	if opts.GetStartToCloseTimeout().AsDuration() > 0 {
		return
	}
	stc := def
	if s := opts.GetScheduleToCloseTimeout().AsDuration(); s > 0 {
		stc = s
	}
	opts.StartToCloseTimeout = durationpb.New(stc)
}

// optionsInForce are the options a rule applies: options_in_force once
// InForce has filled it, else the code's own.
func optionsInForce(in *durablev1.PendingActivity) *durablev1.ActivityOptions {
	if o := in.GetOptionsInForce(); o != nil {
		return o
	}
	return in.GetOptions()
}

// overrideKey names an override: an activity type on one task queue, or on
// every queue ("").
type overrideKey struct {
	activityType string
	taskQueue    string
}

// overrideTable holds the overrides in force. A table is never changed once
// the engine publishes it: a change makes a new one (with), so readers need
// no lock.
type overrideTable map[overrideKey]*durablev1.PolicyOverride

// lookup returns the override for an activity of type typ on queue: the one
// for that queue wins over the one for every queue; nil when neither exists.
func (t overrideTable) lookup(typ, queue string) *durablev1.PolicyOverride {
	if len(t) == 0 {
		return nil
	}
	if o := t[overrideKey{typ, queue}]; o != nil {
		return o
	}
	return t[overrideKey{typ, ""}]
}

// with returns a copy of t with the overrides set or, when cleared, removed.
func (t overrideTable) with(changes []*durablev1.PolicyOverride) overrideTable {
	out := make(overrideTable, len(t)+len(changes))
	for k, o := range t {
		out[k] = o
	}
	for _, o := range changes {
		k := overrideKey{o.GetActivityType(), o.GetTaskQueue()}
		if o.GetCleared() {
			delete(out, k)
			continue
		}
		out[k] = o
	}
	return out
}

// sorted returns the overrides by activity type and then task queue.
func (t overrideTable) sorted() []*durablev1.PolicyOverride {
	out := make([]*durablev1.PolicyOverride, 0, len(t))
	for _, o := range t {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *durablev1.PolicyOverride) int {
		return cmp.Or(cmp.Compare(a.GetActivityType(), b.GetActivityType()), cmp.Compare(a.GetTaskQueue(), b.GetTaskQueue()))
	})
	return out
}

// decisionCopy copies what the rules read of a record, leaving out its
// attempt trail and heartbeat details, which can be large and which no rule
// reads; the copy shares them with in instead.
func decisionCopy(in *durablev1.PendingActivity) *durablev1.PendingActivity {
	attempts, details := in.Attempts, in.HeartbeatDetails
	in.Attempts, in.HeartbeatDetails = nil, nil
	v := proto.Clone(in).(*durablev1.PendingActivity)
	in.Attempts, in.HeartbeatDetails = attempts, details
	v.Attempts, v.HeartbeatDetails = attempts, details
	return v
}

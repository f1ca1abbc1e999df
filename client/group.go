package client

import (
	"cmp"
	"slices"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// FailureGroup is the dead letters (or other activities) whose last failures
// share a fingerprint: the same failure type and the same message but for
// numbers, ids, addresses and quoted values.
type FailureGroup struct {
	// Fingerprint is what wf dlq list --fingerprint and a redrive's filter
	// take to select the group.
	Fingerprint string
	// FailureType is the type every failure of the group has.
	FailureType string
	// Message is the message with its details replaced by placeholders:
	// "connection refused <ip>:<n>".
	Message string
	// Count is how many activities the group holds.
	Count int
	// First and Last are the earliest and latest dead-lettered times in the
	// group; zero for activities that are not dead-lettered.
	First, Last time.Time
	// Example is one activity of the group, the one dead-lettered last.
	Example *durablev1.PendingActivity
}

// GroupByFingerprint groups activities by the fingerprint of their last
// failure (computed from the failure for records that predate fingerprints),
// largest group first, then the one that grew last. Activities without a
// failure are left out.
func GroupByFingerprint(acts []*durablev1.PendingActivity) []FailureGroup {
	byFP := map[string]*FailureGroup{}
	var order []string
	for _, a := range acts {
		f := a.GetLastFailure()
		if f == nil {
			continue
		}
		fp := a.GetFailureFingerprint()
		if fp == "" {
			fp = activity.Fingerprint(f)
		}
		g, ok := byFP[fp]
		if !ok {
			g = &FailureGroup{Fingerprint: fp, FailureType: f.GetType(), Message: activity.NormalizedMessage(f)}
			byFP[fp] = g
			order = append(order, fp)
		}
		g.Count++
		var at time.Time
		if t := a.GetDeadLetteredTime(); t != nil {
			at = t.AsTime()
		}
		if !at.IsZero() && (g.First.IsZero() || at.Before(g.First)) {
			g.First = at
		}
		if g.Example == nil || !at.Before(g.Last) {
			g.Last, g.Example = at, a
		}
	}
	out := make([]FailureGroup, 0, len(order))
	for _, fp := range order {
		out = append(out, *byFP[fp])
	}
	slices.SortStableFunc(out, func(a, b FailureGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.Last.Compare(a.Last), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	return out
}

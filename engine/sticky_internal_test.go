package engine

import (
	"strconv"

	"testing"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestPartialFromOnlyForTheSessionOfThePreviousTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prev    stickyMark
		known   bool
		session string
		started int64
		want    int64
	}{
		{"SameSession", stickyMark{"a", 3}, true, "a", 9, 4},
		{"NoSessionAsked", stickyMark{"a", 3}, true, "", 9, 0},
		{"OtherSession", stickyMark{"a", 3}, true, "b", 9, 0},
		{"NothingRemembered", stickyMark{}, false, "a", 9, 0},
		{"PreviousTaskWithoutSession", stickyMark{"", 3}, true, "", 9, 0},
		{"MarkNotBeforeThisTask", stickyMark{"a", 9}, true, "a", 9, 0},
		{"MarkWithoutEvent", stickyMark{"a", 0}, true, "a", 9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := partialFrom(tc.prev, tc.known, tc.session, tc.started); got != tc.want {
				t.Errorf("partialFrom(%+v, %v, %q, %d) = %d, want %d", tc.prev, tc.known, tc.session, tc.started, got, tc.want)
			}
		})
	}
}

func TestContinuesTaskOnlyAfterACompletedTask(t *testing.T) {
	t.Parallel()
	const (
		done  = evWorkflowTaskCompleted
		sched = evWorkflowTaskScheduled
		start = evWorkflowTaskStarted
		fail  = evWorkflowTaskFailed
		act   = evActivityScheduled
		res   = evActivityCompleted
	)
	// events numbers types from id 4 on: the previous task started at 3.
	events := func(types ...durablev1.EventType) []*durablev1.HistoryEvent {
		var out []*durablev1.HistoryEvent
		for i, typ := range types {
			out = append(out, &durablev1.HistoryEvent{EventId: int64(4 + i), Type: typ})
		}
		return out
	}
	tests := []struct {
		name   string
		events []*durablev1.HistoryEvent
		want   bool
	}{
		{"CompletedThenNext", events(done, act, act, res, sched, start), true},
		{"ResultWhileTheTaskRan", events(res, done, act, sched, start), true},
		{"FailedTask", events(fail, sched, start), false},
		{"TimedOutThenRetriedAndCompleted", events(fail, sched, start, done, sched, start), false},
		{"CompletedThenFailed", events(done, act, sched, start, fail, sched, start), false},
		{"NoEvents", nil, false},
		{"NotEndingWithStarted", events(done, act, sched), false},
		{"ScheduledBeforeCompleted", events(sched, done, start), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := int64(3 + len(tc.events))
			if got := continuesTask(tc.events, 4, started); got != tc.want {
				t.Errorf("continuesTask(%v) = %v, want %v", tc.events, got, tc.want)
			}
		})
	}
	t.Run("Gap", func(t *testing.T) {
		ev := events(done, act, sched, start)
		gap := append(ev[:1:1], ev[2:]...)
		if continuesTask(gap, 4, 7) {
			t.Error("continuesTask with event 5 missing = true, want false")
		}
		if continuesTask(ev, 3, 7) {
			t.Error("continuesTask from 3 of events from 4 = true, want false")
		}
	})
}

func TestStickyMarksStayWithinTheLimit(t *testing.T) {
	t.Parallel()
	var s stickyMarks
	for i := range stickyLimit + 10 {
		s.swap(strconv.Itoa(i), stickyMark{session: "s", started: 3})
	}
	if n := s.len(); n != stickyLimit {
		t.Fatalf("marks = %d, want the limit %d", n, stickyLimit)
	}
	if _, ok := s.swap("x", stickyMark{}); ok {
		t.Error("a workflow never marked has a mark")
	}
	s.swap("y", stickyMark{session: "s", started: 5})
	if prev, ok := s.swap("y", stickyMark{}); !ok || prev.started != 5 {
		t.Errorf("swap returned %+v, %v; want the mark of event 5", prev, ok)
	}
	if _, ok := s.swap("y", stickyMark{}); ok {
		t.Error("a poll without a session left the mark in place")
	}
}

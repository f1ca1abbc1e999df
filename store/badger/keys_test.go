package badger

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var keyT0 = time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)

func TestQueueKey_RoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    engine.QueueEntry
	}{
		{"Activity", engine.QueueEntry{Kind: engine.ActivityTask, Queue: "default", Due: keyT0, Seq: 7, WorkflowID: "wf-1", ActivityID: "3"}},
		{"WorkflowTask", engine.QueueEntry{Kind: engine.WorkflowTask, Queue: "q", Due: keyT0, Seq: 1, WorkflowID: "wf-1"}},
		{"EmptyQueue", engine.QueueEntry{Kind: engine.ActivityTask, Due: time.Unix(0, 0).UTC(), WorkflowID: "w", ActivityID: "a"}},
		{"NegativeSeq", engine.QueueEntry{Kind: engine.ActivityTask, Queue: "q", Due: keyT0, Seq: -5, WorkflowID: "w", ActivityID: "a"}},
		{"Unicode", engine.QueueEntry{Kind: engine.ActivityTask, Queue: "café", Due: keyT0, Seq: 1 << 40, WorkflowID: "wf/ü", ActivityID: "a/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := queueKey(tt.e)
			if !bytes.HasPrefix(k, queuePrefix(tt.e.Kind, tt.e.Queue)) {
				t.Fatalf("key %x lacks its queue prefix", k)
			}
			got, err := decodeQueueKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Due.Equal(tt.e.Due) {
				t.Errorf("due = %v, want %v", got.Due, tt.e.Due)
			}
			got.Due = tt.e.Due
			if got != tt.e {
				t.Errorf("decoded %+v, want %+v", got, tt.e)
			}
		})
	}
}

func TestTimerIndexKey_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, tm := range []engine.Timer{
		{Due: keyT0, Kind: engine.ActivityLeaseTimer, WorkflowID: "wf", ID: "1"},
		{Due: keyT0, Kind: engine.WorkflowTaskLeaseTimer, WorkflowID: "wf"},
		{Due: keyT0.Add(time.Hour), Kind: engine.UserTimer, WorkflowID: "", ID: "t"},
	} {
		got, err := decodeTimerIndexKey(timerIndexKey(tm))
		if err != nil {
			t.Fatal(err)
		}
		if !got.Due.Equal(tm.Due) || got.Kind != tm.Kind || got.WorkflowID != tm.WorkflowID || got.ID != tm.ID {
			t.Errorf("decoded %+v, want %+v", got, tm)
		}
	}
}

func TestDeadLetterKey_RoundTrip(t *testing.T) {
	t.Parallel()
	got, err := decodeDeadLetterKey(deadLetterKey(keyT0, "wf-1", "act/2"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.deadLettered.Equal(keyT0) || got.workflowID != "wf-1" || got.activityID != "act/2" {
		t.Errorf("decoded %+v", got)
	}
}

func TestActivityStateKey_RoundTrip(t *testing.T) {
	t.Parallel()
	k := activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "Charge", "wf/1", "act/2")
	if !bytes.HasPrefix(k, activityStatePrefix(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "Charge", true)) ||
		!bytes.HasPrefix(k, activityStatePrefix(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "", false)) {
		t.Fatalf("key %x lacks its state or type prefix", k)
	}
	got, err := decodeActivityStateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	want := activityStateRef{state: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, activityType: "Charge", workflowID: "wf/1", activityID: "act/2"}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestActivityCountKey_RoundTrip(t *testing.T) {
	t.Parallel()
	k := activityCountKey(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "q/1")
	state, queue, err := decodeActivityCountKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if state != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || queue != "q/1" {
		t.Errorf("decoded %v %q, want RETRYING \"q/1\"", state, queue)
	}
	// One state's counts are a contiguous range, by queue.
	a := activityCountKey(durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, "zz")
	b := activityCountKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "a")
	if bytes.Compare(a, b) >= 0 {
		t.Errorf("a count of a later state sorts first: %x ≥ %x", a, b)
	}
	if _, _, err := decodeActivityCountKey(counterKey()); err == nil {
		t.Error("decoded the counter's key as a count key")
	}
}

func TestFinishedKeys_RoundTrip(t *testing.T) {
	t.Parallel()
	got, err := decodeFinishedTimeKey(finishedTimeKey(keyT0, "wf-1", "act/2"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.finished.Equal(keyT0) || got.workflowID != "wf-1" || got.activityID != "act/2" {
		t.Errorf("decoded %+v", got)
	}
	if k := finishedKey("wf-1", "act/2"); !bytes.HasPrefix(k, finishedPrefix("wf-1")) {
		t.Errorf("finished key %x lacks its workflow's prefix", k)
	}
}

func TestWorkflowStatusKeys_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"wf-1", "a/b", "café ü", "x"} {
		got, err := decodeWorkflowClosedKey(workflowClosedKey(keyT0, id))
		if err != nil {
			t.Fatal(err)
		}
		if !got.closed.Equal(keyT0) || got.workflowID != id {
			t.Errorf("closed key decoded %+v, want %q at %v", got, id, keyT0)
		}
		running, err := decodeWorkflowRunningKey(workflowRunningKey(id))
		if err != nil || running != id {
			t.Errorf("running key decoded %q, %v, want %q", running, err, id)
		}
	}
	if _, err := decodeWorkflowClosedKey([]byte{prefixWorkflowClosed, 1, 2}); !errors.Is(err, errCorrupt) {
		t.Errorf("a closed key without its whole time: err = %v, want errCorrupt", err)
	}
	if _, err := decodeWorkflowRunningKey(workflowKey("wf")); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeWorkflowRunningKey(workflow key): err = %v, want errCorrupt", err)
	}
}

func TestOperationItemKey_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]int64{{1, 0}, {42, 7}, {1 << 40, 1<<62 + 3}} {
		k := operationItemKey(c[0], c[1])
		if !bytes.HasPrefix(k, operationItemPrefix(c[0])) {
			t.Fatalf("key %x lacks its operation's prefix", k)
		}
		seq, index, err := decodeOperationItemKey(k)
		if err != nil || seq != c[0] || index != c[1] {
			t.Errorf("decoded (%d, %d, %v), want (%d, %d)", seq, index, err, c[0], c[1])
		}
	}
	for _, k := range [][]byte{nil, operationKey(1), operationItemKey(1, 2)[:12], append(operationItemKey(1, 2), 'x')} {
		if _, _, err := decodeOperationItemKey(k); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeOperationItemKey(%x): err = %v, want errCorrupt", k, err)
		}
	}
}

func TestLatencyHourKey_RoundTrip(t *testing.T) {
	t.Parallel()
	hour := keyT0.Truncate(time.Hour)
	for _, typ := range []string{"Charge", "", "café/ü"} {
		got, err := decodeLatencyHourKey(latencyHourKey(typ, hour))
		if err != nil {
			t.Fatal(err)
		}
		if got.activityType != typ || !got.hour.Equal(hour) {
			t.Errorf("decoded %+v, want %q at %v", got, typ, hour)
		}
	}
	if _, err := decodeLatencyHourKey(append(latencyHourKey("a", hour), 'x')); !errors.Is(err, errCorrupt) {
		t.Errorf("a key with a tail: err = %v, want errCorrupt", err)
	}
}

func TestPolicyOverrideKey_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range [][2]string{{"Charge", ""}, {"Charge", "payments"}, {"", "q/ü"}} {
		typ, queue, err := decodePolicyOverrideKey(policyOverrideKey(tt[0], tt[1]))
		if err != nil {
			t.Fatal(err)
		}
		if typ != tt[0] || queue != tt[1] {
			t.Errorf("decoded %q %q, want %q %q", typ, queue, tt[0], tt[1])
		}
	}
}

func TestCounterValue_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{0, 1, -1, 1 << 62} {
		got, err := decodeCounter(encodeCounter(n))
		if err != nil || got != n {
			t.Errorf("decodeCounter(encodeCounter(%d)) = %d, %v", n, got, err)
		}
	}
	if _, err := decodeCounter([]byte{1, 2}); !errors.Is(err, errCorrupt) {
		t.Errorf("short counter value: err = %v, want errCorrupt", err)
	}
}

// TestKeys_SortByValue checks that byte order of each key kind is the order
// the store promises: due time, then seq (queues); due time (timers); event id
// (history); dead-lettered time (dead letters); close time, then id (closed
// workflows); id (workflows, running workflows); seq (operations), then index
// (work items); hour within a type (latency); queue within a type, every
// queue first (overrides). Length-prefixed parts sort shorter first, which
// only groups, never splits, one value's range.
func TestKeys_SortByValue(t *testing.T) {
	t.Parallel()
	q := func(due time.Duration, seq int64, wf string) []byte {
		return queueKey(engine.QueueEntry{Kind: engine.ActivityTask, Queue: "q", Due: keyT0.Add(due), Seq: seq, WorkflowID: wf, ActivityID: "1"})
	}
	tm := func(due time.Duration, kind engine.TimerKind) []byte {
		return timerIndexKey(engine.Timer{Due: keyT0.Add(due), Kind: kind, WorkflowID: "zz", ID: "9"})
	}
	tests := []struct {
		name  string
		inOrd [][]byte
	}{
		{"QueueByDueThenSeq", [][]byte{
			q(-time.Hour, 99, "z"), q(0, -1, "z"), q(0, 0, "z"), q(0, 1, "a"), q(0, 2, "a"),
			q(time.Nanosecond, 0, "a"), q(time.Second, 0, "a"), q(300*24*time.Hour, 0, "a"),
		}},
		{"TimersByDueThenKind", [][]byte{
			tm(-time.Minute, engine.UserTimer), tm(0, engine.ActivityLeaseTimer), tm(0, engine.UserTimer),
			tm(time.Nanosecond, engine.ActivityLeaseTimer), tm(time.Hour, engine.ActivityLeaseTimer),
		}},
		{"HistoryByEventID", [][]byte{
			historyKey("wf", -1), historyKey("wf", 0), historyKey("wf", 1), historyKey("wf", 2),
			historyKey("wf", 10), historyKey("wf", 255), historyKey("wf", 256), historyKey("wf", 1<<40),
		}},
		{"DeadLettersByTime", [][]byte{
			deadLetterKey(time.Time{}, "z", "z"), deadLetterKey(keyT0, "z", "z"),
			deadLetterKey(keyT0.Add(time.Microsecond), "a", "a"), deadLetterKey(keyT0.Add(time.Hour), "a", "a"),
		}},
		{"WorkflowsByID", [][]byte{workflowKey(""), workflowKey("a"), workflowKey("a-1"), workflowKey("ab"), workflowKey("b")}},
		{"OperationsBySeq", [][]byte{operationKey(-1), operationKey(1), operationKey(2), operationKey(255), operationKey(256), operationKey(1 << 40)}},
		{"OperationItemsBySeqThenIndex", [][]byte{
			operationItemKey(1, 0), operationItemKey(1, 1), operationItemKey(1, 255), operationItemKey(1, 256), operationItemKey(1, 1<<40),
			operationItemKey(2, 0), operationItemKey(256, 0),
		}},
		{"ActivityStateByStateThenType", [][]byte{
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, "Zzz", "z", "z"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "A", "z", "z"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "B", "a", "a"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "B", "b", "a"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "B", "b", "b"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_STARTED, "AA", "a", "a"),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, "A", "a", "a"),
		}},
		{"ClosedWorkflowsByCloseTimeThenID", [][]byte{
			workflowClosedKey(time.Time{}, "z"), workflowClosedKey(keyT0, "a"), workflowClosedKey(keyT0, "a-1"),
			workflowClosedKey(keyT0, "b"), workflowClosedKey(keyT0.Add(time.Nanosecond), "a"),
			workflowClosedKey(keyT0.Add(time.Hour), "0"), workflowClosedKey(time.Unix(0, 1<<62), ""),
		}},
		{"RunningWorkflowsByID", [][]byte{
			workflowRunningKey(""), workflowRunningKey("a"), workflowRunningKey("a-1"), workflowRunningKey("ab"), workflowRunningKey("b"),
		}},
		{"FinishedByTime", [][]byte{
			finishedTimeKey(time.Time{}, "z", "z"), finishedTimeKey(keyT0, "z", "z"),
			finishedTimeKey(keyT0.Add(time.Nanosecond), "a", "a"), finishedTimeKey(keyT0.Add(24*time.Hour), "a", "a"),
		}},
		{"LatencyHoursByTypeThenHour", [][]byte{
			latencyHourKey("A", time.Time{}), latencyHourKey("A", keyT0), latencyHourKey("A", keyT0.Add(time.Hour)),
			latencyTypeEnd("A"), latencyHourKey("B", time.Time{}), latencyHourKey("AB", keyT0),
		}},
		{"PolicyOverridesByTypeThenQueue", [][]byte{
			policyOverrideKey("A", ""), policyOverrideKey("A", "a"), policyOverrideKey("A", "b"),
			policyOverrideKey("B", ""), policyOverrideKey("AB", ""),
		}},
		{"AuditByTimeThenID", [][]byte{
			auditKey(keyT0, 9), auditKey(keyT0.Add(time.Nanosecond), 1), auditKey(keyT0.Add(time.Nanosecond), 2),
			auditKey(keyT0.Add(time.Hour), 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !slices.IsSortedFunc(tt.inOrd, bytes.Compare) {
				for i := 1; i < len(tt.inOrd); i++ {
					if bytes.Compare(tt.inOrd[i-1], tt.inOrd[i]) >= 0 {
						t.Errorf("key %d (%x) does not sort before key %d (%x)", i-1, tt.inOrd[i-1], i, tt.inOrd[i])
					}
				}
			}
		})
	}
}

// TestKeys_PrefixesDoNotOverlap checks that the range of one id never holds
// the keys of another id that extends it.
func TestKeys_PrefixesDoNotOverlap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		prefix []byte
		key    []byte
	}{
		{"HistoryOfLongerID", historyPrefix("wf"), historyKey("wf1", 1)},
		{"HistoryOfShorterID", historyPrefix("wf1"), historyKey("wf", 0x31)},
		{"ActivitiesOfLongerID", activityPrefix("wf"), activityKey("wf1", "1")},
		{"QueueOfLongerName", queuePrefix(engine.ActivityTask, "q"), queueKey(engine.QueueEntry{Kind: engine.ActivityTask, Queue: "q2"})},
		{"QueueOfOtherKind", queuePrefix(engine.ActivityTask, "q"), queueKey(engine.QueueEntry{Kind: engine.WorkflowTask, Queue: "q"})},
		{"LatencyOfLongerType", latencyTypePrefix("A"), latencyHourKey("AB", keyT0)},
		{"OverridesOfLongerType", policyOverrideKey("A", ""), policyOverrideKey("AB", "")},
		{"ItemsOfOtherOperation", operationItemPrefix(1), operationItemKey(2, 1)},
		{"ItemsOfOperationWithHigherByte", operationItemPrefix(1), operationItemKey(256+1, 0)},
		{"StateOfLongerType", activityStatePrefix(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "Charge", true),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "ChargeCard", "w", "a")},
		{"StateOfOtherState", activityStatePrefix(durablev1.ActivityState_ACTIVITY_STATE_RETRYING, "", false),
			activityStateKey(durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, "Charge", "w", "a")},
		{"FinishedOfLongerID", finishedPrefix("wf"), finishedKey("wf1", "1")},
	}
	for _, tt := range tests {
		if bytes.HasPrefix(tt.key, tt.prefix) {
			t.Errorf("%s: key %x falls in range %x", tt.name, tt.key, tt.prefix)
		}
	}
}

func TestAppendTime_ClampsOutOfRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"ZeroTime", time.Time{}, time.Unix(0, 0)},
		{"BeforeEpoch", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0)},
		{"Epoch", time.Unix(0, 0), time.Unix(0, 0)},
		{"OtherZone", keyT0.In(time.FixedZone("x", 3600)), keyT0},
	}
	for _, tt := range tests {
		r := keyReader{b: appendTime(nil, tt.in)}
		if got := r.time(); !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("%s: decoded %v, want %v in UTC", tt.name, got, tt.want)
		}
	}
}

func TestDecode_RejectsMalformedKeys(t *testing.T) {
	t.Parallel()
	good := queueKey(engine.QueueEntry{Kind: engine.ActivityTask, Queue: "q", Due: keyT0, WorkflowID: "w", ActivityID: "a"})
	for _, k := range [][]byte{nil, {prefixTimerIndex}, good[:5], good[:len(good)-4]} {
		if _, err := decodeQueueKey(k); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeQueueKey(%x): err = %v, want errCorrupt", k, err)
		}
	}
	if _, err := decodeDeadLetterKey(workflowKey("w")); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeDeadLetterKey(workflow key): err = %v, want errCorrupt", err)
	}
	if _, err := decodeActivityStateKey(deadLetterKey(keyT0, "w", "a")); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeActivityStateKey(dead-letter key): err = %v, want errCorrupt", err)
	}
	if _, err := decodeActivityStateKey([]byte{prefixActivityState, 2, 0, 9, 'a'}); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeActivityStateKey(short): err = %v, want errCorrupt", err)
	}
	if _, err := decodeFinishedTimeKey(finishedKey("w", "a")); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeFinishedTimeKey(finished record key): err = %v, want errCorrupt", err)
	}
	if _, err := decodeTimerIndexKey([]byte{prefixTimerIndex, 1, 2}); !errors.Is(err, errCorrupt) {
		t.Errorf("decodeTimerIndexKey(short): err = %v, want errCorrupt", err)
	}
}

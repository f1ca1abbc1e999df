package backlog

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/demo/sink"
)

// partial is the accumulator of items [0, n), what a checkpoint at n holds.
func partial(n int) Acc { return Expected(n) }

func TestAnalyzeBacklog_ResumesFromHeartbeatDetails(t *testing.T) {
	t.Parallel()
	const items, batch = 1000, 200
	for _, tc := range []struct {
		name      string
		details   []byte
		wantFrom  int
		wantBeats []int // next_index of the boundary heartbeats
	}{
		{"FreshStart", nil, 0, []int{200, 400, 600, 800, 1000}},
		{"FromCheckpoint", mustJSON(t, Checkpoint{NextIndex: 600, Acc: partial(600)}), 600, []int{800, 1000}},
		{"Done", mustJSON(t, Checkpoint{NextIndex: 1000, Acc: partial(1000)}), 1000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := sink.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var beats []int
			last := -1
			ctx := activity.WithInfo(context.Background(), &activity.Info{
				WorkflowID: "wf", ActivityID: "1", Attempt: 2, HeartbeatDetails: tc.details,
				HeartbeatFunc: func(b []byte) {
					var cp Checkpoint
					if err := json.Unmarshal(b, &cp); err != nil {
						t.Errorf("heartbeat details %q: %v", b, err)
					}
					if cp.NextIndex != last && cp.NextIndex != tc.wantFrom {
						beats = append(beats, cp.NextIndex)
					}
					last = cp.NextIndex
				},
			})
			a := &Activities{Sink: st}
			got, err := a.AnalyzeBacklog(ctx, Input{Items: items, Batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			if got.ResumedFrom != tc.wantFrom || got.Attempt != 2 {
				t.Errorf("resumed from %d on attempt %d, want %d on 2", got.ResumedFrom, got.Attempt, tc.wantFrom)
			}
			if !reflect.DeepEqual(got.Acc, Expected(items)) {
				t.Errorf("acc %+v, want %+v", got.Acc, Expected(items))
			}
			if !reflect.DeepEqual(beats, tc.wantBeats) {
				t.Errorf("checkpoints %v, want %v", beats, tc.wantBeats)
			}
			if n := st.Stats().Deliveries; n != items-tc.wantFrom {
				t.Errorf("%d items delivered, want %d", n, items-tc.wantFrom)
			}
		})
	}
}

func TestAnalyzeBacklog_OutageFailsRetryably(t *testing.T) {
	t.Parallel()
	ctx := activity.WithInfo(context.Background(), &activity.Info{WorkflowID: "wf", ActivityID: "1", Attempt: 1})
	a := &Activities{Outage: true}
	_, err := a.AnalyzeBacklog(ctx, Input{})
	var ae *activity.Error
	if !errors.As(err, &ae) || ae.Type != FailureOutage || ae.NoRetry {
		t.Fatalf("err = %v, want retryable %s", err, FailureOutage)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

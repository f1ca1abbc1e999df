package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// scrape reads and parses /metrics.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return families
}

// value is the value of the sample of family name whose labels include all
// of labels (name=value pairs); a histogram's is its sample count. It fails
// the test if there is no such sample.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return 0
}

// TestMetricsExposition runs one activity through a retry, a dead letter, a
// redrive and a completion on a real durabled, then checks that /metrics
// parses, that its counters say exactly that, and that no label carries a
// workflow or activity id.
func TestMetricsExposition(t *testing.T) {
	t.Parallel()
	d := testdaemon.Exec(t, filepath.Join(t.TempDir(), "data"), "--metrics-listen", "127.0.0.1:0", "--dlq-after-attempts", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := rawClient(t, d.Addr)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const wf = "wf-metrics-7f3a"
	_, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: "q"})
	must(err)
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q"})
	must(err)
	_, err = svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "act-9b2c", ActivityType: "Charge",
		ActivityOptions: &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 1}},
	}}})
	must(err)
	poll := func() []byte {
		t.Helper()
		for {
			at, err := svc.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q"})
			must(err)
			if len(at.GetTasks()) == 1 {
				return at.GetTasks()[0].GetTaskToken()
			}
		}
	}
	fail := &durablev1.Failure{Type: "Unavailable", Message: "down"}
	_, err = svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: poll(), Failure: fail}) // retried
	must(err)
	_, err = svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: poll(), Failure: fail}) // dead-lettered
	must(err)

	fams := scrape(t, d.MetricsAddr)
	if got := value(t, fams, "durable_dead_letters"); got != 1 {
		t.Errorf("durable_dead_letters = %v, want 1", got)
	}
	if got := value(t, fams, "durable_activities", "task_queue", "q", "state", "dead_lettered"); got != 1 {
		t.Errorf("durable_activities{q, dead_lettered} = %v, want 1", got)
	}

	_, err = svc.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: wf, ActivityId: "act-9b2c", Reason: "fixed"})
	must(err)
	_, err = svc.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: poll(), Result: []byte(`"ok"`)})
	must(err)

	// A second activity whose first attempt is left to time out.
	wt, err = svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q"})
	must(err)
	_, err = svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "act-slow", ActivityType: "Ship",
		ActivityOptions: &durablev1.ActivityOptions{
			StartToCloseTimeout: durationpb.New(100 * time.Millisecond),
			RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 1},
		},
	}}})
	must(err)
	poll()                                                                                                                    // attempt 1, never reported
	_, err = svc.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: poll(), Result: []byte(`"ok"`)}) // attempt 2, after the timeout
	must(err)

	fams = scrape(t, d.MetricsAddr)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"durable_activity_attempts_total", []string{"activity_type", "Charge", "outcome", "retried"}, 1},
		{"durable_activity_attempts_total", []string{"activity_type", "Charge", "outcome", "dead_lettered"}, 1},
		{"durable_activity_attempts_total", []string{"activity_type", "Charge", "outcome", "completed"}, 1},
		{"durable_activity_dead_letters_total", []string{"activity_type", "Charge"}, 1},
		{"durable_activity_redrives_total", []string{"activity_type", "Charge"}, 1},
		{"durable_activity_attempt_duration_seconds", []string{"activity_type", "Charge"}, 3},
		{"durable_activity_schedule_to_start_seconds", []string{"activity_type", "Charge"}, 3},
		{"durable_activity_retry_lateness_seconds", nil, 2},
		{"durable_activity_attempts_total", []string{"activity_type", "Ship", "outcome", "timed_out"}, 1},
		{"durable_activity_attempts_total", []string{"activity_type", "Ship", "outcome", "completed"}, 1},
		{"durable_activity_timeouts_total", []string{"activity_type", "Ship", "kind", "start_to_close"}, 1},
		{"durable_dead_letters", nil, 0},
		{"durable_grpc_server_handled_total", []string{"grpc_method", "RedriveDeadLetter", "grpc_code", "OK"}, 1},
		{"durable_grpc_server_handled_total", []string{"grpc_method", "FailActivityTask", "grpc_code", "OK"}, 2},
		{"durable_grpc_server_handled_total", []string{"grpc_method", "CompleteActivityTask", "grpc_code", "OK"}, 2},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"durable_commit_batch_transitions", "durable_commit_duration_seconds", "durable_fsync_duration_seconds"} {
		if got := value(t, fams, name); got == 0 {
			t.Errorf("%s has no samples", name)
		}
	}
	value(t, fams, "durable_watch_streams")
	for name, f := range fams {
		if !strings.HasPrefix(name, "durable_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s lacks the durable_ prefix", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), wf) || strings.Contains(l.GetValue(), "act-9b2c") {
					t.Errorf("%s has an id in label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}

	resp, err := http.Get("http://" + d.MetricsAddr + "/healthz")
	must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", resp.StatusCode)
	}
}

// TestNodeNameInLogsAndMetrics runs a real durabled with --node: the
// listening line, the metrics and ListNodes all name it.
func TestNodeNameInLogsAndMetrics(t *testing.T) {
	t.Parallel()
	d := testdaemon.Exec(t, filepath.Join(t.TempDir(), "data"), "--metrics-listen", "127.0.0.1:0", "--node", "edge-1")
	if line := logLine(d.Logs(), "msg=listening"); !strings.Contains(line, " node=edge-1 ") {
		t.Errorf("the listening line does not name the node: %s", line)
	}
	fams := scrape(t, d.MetricsAddr)
	if got := value(t, fams, "durable_node_info", "node", "edge-1"); got != 1 {
		t.Errorf(`durable_node_info{node="edge-1"} = %v, want 1`, got)
	}
	if got := value(t, fams, "durable_nodes_alive"); got != 1 {
		t.Errorf("durable_nodes_alive = %v, want 1 (the one daemon on Badger)", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := rawClient(t, d.Addr).ListNodes(ctx, &durablev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetNodes()) != 1 || r.GetNodes()[0].GetName() != "edge-1" || r.GetAnsweredBy() != "edge-1" {
		t.Errorf("ListNodes = %v, want edge-1 alone", r)
	}
}

// logLine is the first line of logs that contains sub.
func logLine(logs, sub string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

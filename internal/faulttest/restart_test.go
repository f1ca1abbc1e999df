// Package faulttest kills a real durabled with SIGKILL and checks what comes
// back when it restarts on the same data directory.
package faulttest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var durabledBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "faulttest")
	if err != nil {
		panic(err)
	}
	durabledBin = filepath.Join(dir, "durabled")
	if out, err := exec.Command("go", "build", "-o", durabledBin, "github.com/tinyllm/durable/cmd/durabled").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	testdaemon.Cleanup()
	os.Exit(code)
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// daemon is one durabled process.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	c    durablev1.DurableClient
	conn *grpc.ClientConn
}

// startDaemon runs durabled on dataDir and waits for its "listening" line.
func startDaemon(t *testing.T, dataDir string) *daemon {
	t.Helper()
	cmd := exec.Command(durabledBin, "--listen", "127.0.0.1:0", "--data", dataDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	d := &daemon{cmd: cmd}
	t.Cleanup(func() { d.kill() })
	select {
	case d.addr = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("durabled did not report listening within 60s")
	}
	d.conn, err = grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	d.c = durablev1.NewDurableClient(d.conn)
	return d
}

func (d *daemon) kill() {
	if d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
		d.cmd.Wait()
	}
	if d.conn != nil {
		d.conn.Close()
	}
}

func policy(initial time.Duration, maxAttempts int32) *durablev1.ActivityOptions {
	return &durablev1.ActivityOptions{
		StartToCloseTimeout: durationpb.New(2 * time.Second),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: initial.Milliseconds(), MaxIntervalMs: initial.Milliseconds(), MaxAttempts: maxAttempts},
	}
}

// schedule starts workflow id on queue "wf" and schedules one activity on
// queue, through the raw protocol.
func schedule(t *testing.T, c durablev1.DurableClient, id, queue string, opts *durablev1.ActivityOptions) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "T", TaskQueue: "wf"}); err != nil {
		t.Fatal(err)
	}
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "wf", Identity: "test"})
	if err != nil || wt.GetWorkflowId() != id {
		t.Fatalf("workflow task for %s: %v %v", id, wt.GetWorkflowId(), err)
	}
	opts.TaskQueue = queue
	if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Work", ActivityOptions: opts,
	}}}); err != nil {
		t.Fatal(err)
	}
}

func poll(t *testing.T, c durablev1.DurableClient, queue string, wait time.Duration) *durablev1.ActivityTask {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for ctx.Err() == nil {
		r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "test"})
		if err != nil {
			// gRPC keeps its own copy of the deadline and may report it a
			// moment before ctx's timer fires.
			if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
				break
			}
			t.Fatalf("poll %s: %v", queue, err)
		}
		if len(r.GetTasks()) > 0 {
			return r.GetTasks()[0]
		}
	}
	return nil
}

func describe(t *testing.T, c durablev1.DurableClient, id string) *durablev1.PendingActivity {
	t.Helper()
	d, err := c.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetPendingActivities()) != 1 {
		t.Fatalf("%s has %d pending activities", id, len(d.GetPendingActivities()))
	}
	return d.GetPendingActivities()[0]
}

// TestRestartKeepsEveryTaskState: tasks scheduled, leased, retrying with a
// long backoff and dead-lettered survive a SIGKILL of durabled. After the
// restart on the same data dir the scheduled, retrying and dead-lettered
// ones are in the same state with the same due time, and the leased one
// comes back for another attempt once its lease has run out.
func TestRestartKeepsEveryTaskState(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	d := startDaemon(t, data)
	ctx := context.Background()
	fail := func(task *durablev1.ActivityTask) {
		t.Helper()
		if _, err := d.c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	schedule(t, d.c, "scheduled", "q-scheduled", policy(time.Second, 3))
	schedule(t, d.c, "leased", "q-leased", policy(100*time.Millisecond, 3))
	leased := poll(t, d.c, "q-leased", 10*time.Second)
	schedule(t, d.c, "retrying", "q-retrying", policy(time.Hour, 3))
	fail(poll(t, d.c, "q-retrying", 10*time.Second))
	schedule(t, d.c, "dead", "q-dead", policy(time.Second, 1))
	fail(poll(t, d.c, "q-dead", 10*time.Second))

	before := map[string]*durablev1.PendingActivity{}
	for _, id := range []string{"scheduled", "leased", "retrying", "dead"} {
		before[id] = describe(t, d.c, id)
	}
	if before["retrying"].GetState() != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || before["dead"].GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		t.Fatalf("setup: retrying %v, dead %v", before["retrying"].GetState(), before["dead"].GetState())
	}
	d.kill() // SIGKILL: nothing is flushed on the way out

	d = startDaemon(t, data)
	for _, id := range []string{"scheduled", "retrying", "dead"} {
		got, want := describe(t, d.c, id), before[id]
		if got.GetState() != want.GetState() || got.GetAttempt() != want.GetAttempt() ||
			!got.GetNextAttemptTime().AsTime().Equal(want.GetNextAttemptTime().AsTime()) {
			t.Errorf("%s after restart: %v attempt %d due %v; before: %v attempt %d due %v", id,
				got.GetState(), got.GetAttempt(), got.GetNextAttemptTime().AsTime(),
				want.GetState(), want.GetAttempt(), want.GetNextAttemptTime().AsTime())
		}
	}
	dl, err := d.c.ListDeadLetters(ctx, &durablev1.ListDeadLettersRequest{})
	if err != nil || len(dl.GetDeadLetters()) != 1 || dl.GetDeadLetters()[0].GetWorkflowId() != "dead" {
		t.Errorf("dead letters after restart: %v %v", dl.GetDeadLetters(), err)
	}
	if task := poll(t, d.c, "q-scheduled", 10*time.Second); task == nil || task.GetAttempt() != 1 {
		t.Errorf("the scheduled task after restart: %v", task)
	}
	if task := poll(t, d.c, "q-retrying", 200*time.Millisecond); task != nil {
		t.Errorf("the retry due in an hour was delivered after the restart: attempt %d", task.GetAttempt())
	}
	// The lease (2 s start-to-close) expires, is failed as a timeout, and
	// the retry is delivered. The old token is refused.
	again := poll(t, d.c, "q-leased", 30*time.Second)
	if again == nil {
		t.Fatal("the leased task never came back after the restart")
	}
	if again.GetAttempt() != 2 || again.GetIdempotencyKey() != leased.GetIdempotencyKey() {
		t.Errorf("leased task came back as attempt %d key %q, want attempt 2 key %q", again.GetAttempt(), again.GetIdempotencyKey(), leased.GetIdempotencyKey())
	}
	if f := describe(t, d.c, "leased").GetLastFailure(); f.GetType() != "StartToCloseTimeout" {
		t.Errorf("leased task's last failure = %v, want StartToCloseTimeout", f)
	}
	if _, err := d.c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: leased.GetTaskToken()}); err == nil {
		t.Error("the pre-crash lease could still complete")
	}
}

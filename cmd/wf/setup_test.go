package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestMain keeps the tests from the DURABLE_* variables of whoever runs
// them (tests that want one set it with setEnv) and removes the durabled
// binary that process tests build.
func TestMain(m *testing.M) {
	getenv = func(string) string { return "" }
	code := m.Run()
	testdaemon.Cleanup()
	testpg.Cleanup()
	os.Exit(code)
}

// setEnv makes wf see env as its environment until the test ends. Tests
// that call it must not be parallel.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	old := getenv
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = old })
}

// result is what one wf invocation printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// wf runs the command in-process with args.
func wf(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// setup starts a daemon and a client to drive the worker side by hand.
func setup(t *testing.T) (addr string, c *client.Client) {
	t.Helper()
	addr = testdaemon.Start(t, engine.Options{})
	return addr, dial(t, addr)
}

// principal is one entry of an auth file, with its token in clear.
type principal struct {
	name, role, token string
	queues            []string
}

// authFile returns the auth file that lists ps.
func authFile(t *testing.T, ps ...principal) []byte {
	t.Helper()
	type entry struct {
		Name        string   `json:"name"`
		Role        string   `json:"role"`
		TokenSHA256 string   `json:"token_sha256"`
		TaskQueues  []string `json:"task_queues,omitempty"`
	}
	var file struct {
		Principals []entry `json:"principals"`
	}
	for _, p := range ps {
		sum := sha256.Sum256([]byte(p.token))
		file.Principals = append(file.Principals, entry{p.name, p.role, hex.EncodeToString(sum[:]), p.queues})
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dial connects to the daemon at addr, to drive the worker side by hand;
// with client.WithToken, as a principal of a daemon with auth.
func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAddr returns a local address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// driver plays the worker side of the protocol for one task queue.
type driver struct {
	t     *testing.T
	svc   durablev1.DurableClient
	queue string
}

func newDriver(t *testing.T, c *client.Client, queue string) *driver {
	return &driver{t: t, svc: c.Service(), queue: queue}
}

func (d *driver) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

// start starts a workflow of type typ on the driver's queue.
func (d *driver) start(id, typ string) {
	d.t.Helper()
	_, err := d.svc.StartWorkflow(d.ctx(), &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: typ, TaskQueue: d.queue, Input: []byte(`{"n":1}`)})
	if err != nil {
		d.t.Fatalf("start %s: %v", id, err)
	}
}

// decide polls a workflow task and completes it with cmds.
func (d *driver) decide(cmds ...*durablev1.Command) {
	d.t.Helper()
	task, err := d.svc.PollWorkflowTask(d.ctx(), &durablev1.PollWorkflowTaskRequest{TaskQueue: d.queue, Identity: "test-worker"})
	if err != nil || len(task.GetTaskToken()) == 0 {
		d.t.Fatalf("poll workflow task: %v (empty: %v)", err, len(task.GetTaskToken()) == 0)
	}
	_, err = d.svc.CompleteWorkflowTask(d.ctx(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker", Commands: cmds})
	if err != nil {
		d.t.Fatalf("complete workflow task: %v", err)
	}
}

// activity polls one activity task.
func (d *driver) activity() *durablev1.ActivityTask {
	d.t.Helper()
	resp, err := d.svc.PollActivityTask(d.ctx(), &durablev1.PollActivityTaskRequest{TaskQueue: d.queue, Identity: "test-worker"})
	if err != nil || len(resp.GetTasks()) != 1 {
		d.t.Fatalf("poll activity task: %v (%d tasks)", err, len(resp.GetTasks()))
	}
	return resp.GetTasks()[0]
}

// schedule is a ScheduleActivity command that dead-letters at its first failure.
func schedule(id, typ string) *durablev1.Command {
	return &durablev1.Command{
		Type:         durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
		ActivityId:   id,
		ActivityType: typ,
		Input:        []byte(`{"amount":42}`),
		ActivityOptions: &durablev1.ActivityOptions{
			StartToCloseTimeout: durationpb.New(time.Minute),
			RetryPolicy:         &durablev1.RetryPolicy{MaxAttempts: 1},
		},
	}
}

// deadLetter starts workflow id whose activity "1" (ChargeCard) fails once
// with failure type Boom and is dead-lettered; activity "2" (SendEmail)
// completes, so that stats have both outcomes.
func (d *driver) deadLetter(id string) {
	d.t.Helper()
	d.start(id, "Checkout")
	d.decide(schedule("1", "ChargeCard"), schedule("2", "SendEmail"))
	for range 2 {
		task := d.activity()
		var err error
		if task.GetActivityId() == "1" {
			_, err = d.svc.FailActivityTask(d.ctx(), &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker",
				Failure: &durablev1.Failure{Type: "Boom", Message: "card processor said 503"}})
		} else {
			_, err = d.svc.CompleteActivityTask(d.ctx(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker", Result: []byte(`"sent"`)})
		}
		if err != nil {
			d.t.Fatalf("report activity %s: %v", task.GetActivityId(), err)
		}
	}
}

// mustContain fails unless every want is in s.
func mustContain(t *testing.T, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q:\n%s", w, s)
		}
	}
}

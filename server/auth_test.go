package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// The principals of the auth tests: each authenticates with the bearer
// token "token-" + name.
const testAuthFile = `{"principals": [
  {"name": "worker-a", "role": "worker", "token_sha256": "%s", "task_queues": ["a"]},
  {"name": "worker-any", "role": "worker", "token_sha256": "%s"},
  {"name": "reader", "role": "reader", "token_sha256": "%s"},
  {"name": "operator", "role": "operator", "token_sha256": "%s"}
]}`

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// authServer serves a Server with the test principals on a real port and
// returns a client connection to it (calls carry no credentials of their
// own; see as).
func authServer(t *testing.T, opts Options) *grpc.ClientConn {
	t.Helper()
	ids, err := ParseAuthFile([]byte(fmt.Sprintf(testAuthFile,
		tokenHash("token-worker-a"), tokenHash("token-worker-any"), tokenHash("token-reader"), tokenHash("token-operator"))))
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(st, engine.Options{PollTimeout: 50 * time.Millisecond, DLQAfterAttempts: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	opts.Auth = NewAuthFrom(ids)
	opts.Logger = slog.New(slog.DiscardHandler)
	gs := New(e, opts).NewGRPCServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		e.Close()
		gs.Stop()
		st.Close()
	})
	return conn
}

// as returns a context whose calls carry principal's bearer token ("" for
// none).
func as(principal string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if principal != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer token-"+principal)
	}
	return ctx, cancel
}

// TestRolesTable calls every RPC of the service as every role, and with no
// credentials, over real gRPC: who is refused gets PermissionDenied naming
// the principal, the role and the RPC (Unauthenticated without
// credentials); everyone else gets past authorization to whatever the
// request itself earns.
func TestRolesTable(t *testing.T) {
	t.Parallel()
	conn := authServer(t, Options{})
	c := durablev1.NewDurableClient(conn)
	bad := []byte("not a token")
	calls := map[string]struct {
		allowed string // the roles that may call it
		call    func(ctx context.Context) error
	}{
		"PollWorkflowTask": {"worker", func(ctx context.Context) error {
			_, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "a"})
			return err
		}},
		"CompleteWorkflowTask": {"worker", func(ctx context.Context) error {
			_, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: bad})
			return err
		}},
		"FailWorkflowTask": {"worker", func(ctx context.Context) error {
			_, err := c.FailWorkflowTask(ctx, &durablev1.FailWorkflowTaskRequest{TaskToken: bad})
			return err
		}},
		"GetWorkflowTaskHistory": {"worker", func(ctx context.Context) error {
			_, err := c.GetWorkflowTaskHistory(ctx, &durablev1.GetWorkflowTaskHistoryRequest{TaskToken: bad})
			return err
		}},
		"PollActivityTask": {"worker", func(ctx context.Context) error {
			_, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "a"})
			return err
		}},
		"CompleteActivityTask": {"worker", func(ctx context.Context) error {
			_, err := c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: bad})
			return err
		}},
		"FailActivityTask": {"worker", func(ctx context.Context) error {
			_, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: bad})
			return err
		}},
		"RecordHeartbeat": {"worker", func(ctx context.Context) error {
			_, err := c.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: bad})
			return err
		}},
		"StartWorkflow": {"worker", func(ctx context.Context) error {
			_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: uid("roles"), WorkflowType: "T", TaskQueue: "a"})
			return err
		}},
		"DescribeWorkflow": {"reader operator", func(ctx context.Context) error {
			_, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "none"})
			return err
		}},
		"GetWorkflowHistory": {"reader operator", func(ctx context.Context) error {
			_, err := c.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: "none"})
			return err
		}},
		"ListWorkflows": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{})
			return err
		}},
		"ListDeadLetters": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListDeadLetters(ctx, &durablev1.ListDeadLettersRequest{})
			return err
		}},
		"ListActivityStats": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListActivityStats(ctx, &durablev1.ListActivityStatsRequest{})
			return err
		}},
		"ListTaskQueues": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListTaskQueues(ctx, &durablev1.ListTaskQueuesRequest{})
			return err
		}},
		"ListNodes": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListNodes(ctx, &durablev1.ListNodesRequest{})
			return err
		}},
		"ListAuditRecords": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListAuditRecords(ctx, &durablev1.ListAuditRecordsRequest{})
			return err
		}},
		"Watch": {"reader operator", func(ctx context.Context) error {
			stream, err := c.Watch(ctx, &durablev1.WatchRequest{})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}},
		"RedriveDeadLetter": {"operator", func(ctx context.Context) error {
			_, err := c.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: "none", ActivityId: "1"})
			return err
		}},
		"DescribeOperation": {"reader operator", func(ctx context.Context) error {
			_, err := c.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: "op-0"})
			return err
		}},
		"ListOperations": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListOperations(ctx, &durablev1.ListOperationsRequest{})
			return err
		}},
		"ListPolicyOverrides": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListPolicyOverrides(ctx, &durablev1.ListPolicyOverridesRequest{})
			return err
		}},
		"ListActivities": {"reader operator", func(ctx context.Context) error {
			_, err := c.ListActivities(ctx, &durablev1.ListActivitiesRequest{})
			return err
		}},
		"CancelOperation": {"operator", func(ctx context.Context) error {
			_, err := c.CancelOperation(ctx, &durablev1.CancelOperationRequest{Id: "op-0"})
			return err
		}},
		"SetPolicyOverride": {"operator", func(ctx context.Context) error {
			_, err := c.SetPolicyOverride(ctx, &durablev1.SetPolicyOverrideRequest{ActivityType: "roles-none"})
			return err
		}},
		"ClearPolicyOverride": {"operator", func(ctx context.Context) error {
			_, err := c.ClearPolicyOverride(ctx, &durablev1.ClearPolicyOverrideRequest{ActivityType: "roles-none"})
			return err
		}},
		"RedriveDeadLetters": {"operator", func(ctx context.Context) error {
			_, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Activities: []*durablev1.ActivityRef{{WorkflowId: "none", ActivityId: "1"}}})
			return err
		}},
	}
	var methods []string
	for _, m := range durablev1.Durable_ServiceDesc.Methods {
		methods = append(methods, m.MethodName)
	}
	for _, s := range durablev1.Durable_ServiceDesc.Streams {
		methods = append(methods, s.StreamName)
	}
	callers := []struct{ principal, role string }{
		{"worker-any", "worker"}, {"reader", "reader"}, {"operator", "operator"}, {"", ""},
	}
	for _, m := range methods {
		tc, ok := calls[m]
		if !ok {
			t.Errorf("%s: not in the roles table; add it, with the roles that may call it", m)
			continue
		}
		for _, who := range callers {
			name := who.role
			if name == "" {
				name = "NoCredentials"
			}
			t.Run(m+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := as(who.principal)
				defer cancel()
				st := status.Convert(tc.call(ctx))
				switch {
				case who.principal == "":
					if st.Code() != codes.Unauthenticated {
						t.Errorf("without credentials: %v (%q), want Unauthenticated", st.Code(), st.Message())
					}
				case strings.Contains(" "+tc.allowed+" ", " "+who.role+" "):
					if st.Code() == codes.PermissionDenied || st.Code() == codes.Unauthenticated {
						t.Errorf("%s refused: %v (%q)", who.role, st.Code(), st.Message())
					}
				default:
					want := fmt.Sprintf("principal %q (role %s) may not call %s", who.principal, who.role, m)
					if st.Code() != codes.PermissionDenied || st.Message() != want {
						t.Errorf("%v (%q), want PermissionDenied %q", st.Code(), st.Message(), want)
					}
				}
			})
		}
	}

	t.Run("WorkerLimitedToQueueA", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := as("worker-a")
		defer cancel()
		for name, call := range map[string]func() error{
			"PollActivityTask": func() error {
				_, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "b"})
				return err
			},
			"PollWorkflowTask": func() error {
				_, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "b"})
				return err
			},
			"StartWorkflow": func() error {
				_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: uid("q"), WorkflowType: "T", TaskQueue: "b"})
				return err
			},
		} {
			st := status.Convert(call())
			if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `task queue "b"`) {
				t.Errorf("%s on queue b: %v (%q), want PermissionDenied naming the queue", name, st.Code(), st.Message())
			}
		}
		if _, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "a"}); err != nil {
			t.Errorf("poll of its own queue: %v", err)
		}
	})

	t.Run("WrongTokenAndHealth", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := as("nobody")
		defer cancel()
		if _, err := c.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("unknown token: %v, want Unauthenticated", err)
		}
		ctx, cancel = as("")
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health without credentials: %v, want it open", err)
		}
	})
}

// leaseActivity starts a workflow on queue "a" as worker, schedules one
// activity and leases it; it returns the activity's sealed token.
func leaseActivity(t *testing.T, c durablev1.DurableClient, worker, wf string) []byte {
	t.Helper()
	ctx, cancel := as(worker)
	defer cancel()
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: "a"}); err != nil {
		t.Fatal(err)
	}
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "a"})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("poll workflow task: %v", err)
	}
	_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		at, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "a", MaxTasks: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range at.GetTasks() {
			if task.GetWorkflowId() == wf {
				return task.GetTaskToken()
			}
		}
	}
}

// reseal rebuilds a token around a changed body, keeping the original MAC:
// what a forger who knows the layout but not the key can do.
func reseal(t *testing.T, tok []byte, change func(*durablev1.TaskToken)) []byte {
	t.Helper()
	n := int(tok[1])<<8 | int(tok[2])
	head, body, mac := tok[:3+n], tok[3+n:len(tok)-tokenMACSize], tok[len(tok)-tokenMACSize:]
	var tt durablev1.TaskToken
	if err := proto.Unmarshal(body, &tt); err != nil {
		t.Fatal(err)
	}
	change(&tt)
	b, err := proto.Marshal(&tt)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(append([]byte{}, head...), b...), mac...)
}

// TestForgedTaskTokensRefused: no change to a real token gets past the
// daemon, nor does another principal's token, nor a token sealed under
// another key; the worker that leased the task can still heartbeat and
// complete it.
func TestForgedTaskTokensRefused(t *testing.T) {
	t.Parallel()
	conn := authServer(t, Options{TokenKey: testTokenKey})
	c := durablev1.NewDurableClient(conn)
	wf := uid("forged")
	real := leaseActivity(t, c, "worker-any", wf)
	other := leaseActivity(t, c, "worker-a", uid("forged-other"))

	complete := func(who string, tok []byte) error {
		ctx, cancel := as(who)
		defer cancel()
		_, err := c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: tok, Result: []byte(`"forged"`)})
		return err
	}
	refused := func(what string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	for i := range real {
		flipped := append([]byte{}, real...)
		flipped[i] ^= 0x01
		refused(fmt.Sprintf("byte %d flipped", i), complete("worker-any", flipped), codes.FailedPrecondition)
	}
	refused("lease id raised", complete("worker-any", reseal(t, real, func(tt *durablev1.TaskToken) { tt.LeaseId++ })), codes.FailedPrecondition)
	refused("attempt changed", complete("worker-any", reseal(t, real, func(tt *durablev1.TaskToken) { tt.Attempt = 2 })), codes.FailedPrecondition)
	refused("workflow swapped", complete("worker-any", reseal(t, real, func(tt *durablev1.TaskToken) { tt.WorkflowId = "forged-other" })), codes.FailedPrecondition)
	refused("cut short", complete("worker-any", real[:len(real)-1]), codes.FailedPrecondition)
	refused("sealed under another key", complete("worker-any", sealToken(NewTokenKey(), "worker-any", real[3+len("worker-any"):len(real)-tokenMACSize])), codes.FailedPrecondition)
	refused("another principal's token", complete("worker-a", real), codes.PermissionDenied)
	refused("a token issued to another", complete("worker-any", other), codes.PermissionDenied)
	ctx, cancel := as("worker-a")
	defer cancel()
	_, err := c.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: real, Details: []byte("x")})
	refused("heartbeat with another principal's token", err, codes.PermissionDenied)
	_, err = c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: real, Failure: &durablev1.Failure{Type: "X"}})
	refused("failure with another principal's token", err, codes.PermissionDenied)

	ctx, cancel = as("worker-any")
	defer cancel()
	if _, err := c.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: real, Details: []byte("ckpt")}); err != nil {
		t.Fatalf("the holder's heartbeat: %v", err)
	}
	if err := complete("worker-any", real); err != nil {
		t.Fatalf("the holder's completion: %v", err)
	}
	rctx, rcancel := as("reader")
	defer rcancel()
	h, err := c.GetWorkflowHistory(rctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: wf})
	if err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, ev := range h.GetEvents() {
		if ev.GetType() == durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			completed++
		}
	}
	if completed != 1 {
		t.Errorf("%d ActivityTaskCompleted events, want exactly the holder's", completed)
	}
}

func TestSealedTokenRoundTrip(t *testing.T) {
	t.Parallel()
	key := NewTokenKey()
	body := []byte("lease body")
	tok := sealToken(key, "alice", body)
	got, err := openToken(key, "alice", tok)
	if err != nil || string(got) != string(body) {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := openToken(key, "bob", tok); status.Code(err) != codes.PermissionDenied {
		t.Errorf("another principal: %v", err)
	}
	if _, err := openToken(key, "", tok[:10]); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("short token: %v", err)
	}
	// A principal name long enough to run into the MAC is refused, not read.
	evil := sealToken(key, "", nil)
	evil[1], evil[2] = 0xff, 0xff
	if _, err := openToken(key, "", evil); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("overlong principal: %v", err)
	}
}

func TestParseAuthFile(t *testing.T) {
	t.Parallel()
	h := tokenHash("t")
	ok := func(entries string) string { return `{"principals": [` + entries + `]}` }
	cases := []struct {
		name, file, wantErr string
	}{
		{"Valid", ok(`{"name":"w","role":"worker","token_sha256":"` + h + `","task_queues":["a","b"]},{"name":"alice","role":"operator","cert_cn":"alice"}`), ""},
		{"NotJSON", `principals: []`, "not an auth file"},
		{"NoPrincipals", `{"principals": []}`, "no principals"},
		{"UnknownTopLevelField", `{"principals": [], "users": []}`, `unknown field "users"`},
		{"PlainToken", ok(`{"name":"w","role":"worker","token":"secret"}`), "token_sha256"},
		{"MissingName", ok(`{"role":"worker","token_sha256":"` + h + `"}`), "principals[0]: name is required"},
		{"ReservedName", ok(`{"name":"local","role":"worker","token_sha256":"` + h + `"}`), "reserved"},
		{"BadRole", ok(`{"name":"w","role":"admin","token_sha256":"` + h + `"}`), `principals[0] ("w"): role "admin" is not one of worker, reader, operator`},
		{"QueuesForReader", ok(`{"name":"r","role":"reader","token_sha256":"` + h + `","task_queues":["a"]}`), "workers only"},
		{"BothCredentials", ok(`{"name":"w","role":"worker","token_sha256":"` + h + `","cert_cn":"w"}`), "not both"},
		{"NoCredentials", ok(`{"name":"w","role":"worker"}`), "no credentials"},
		{"ShortHash", ok(`{"name":"w","role":"worker","token_sha256":"abc"}`), "64 hex digits"},
		{"DuplicateName", ok(`{"name":"w","role":"worker","token_sha256":"` + h + `"},{"name":"w","role":"reader","cert_cn":"x"}`), "already used by principals[0]"},
		{"DuplicateToken", ok(`{"name":"w","role":"worker","token_sha256":"` + h + `"},{"name":"r","role":"reader","token_sha256":"` + strings.ToUpper(h) + `"}`), "its own token"},
		{"DuplicateCN", ok(`{"name":"a","role":"reader","cert_cn":"x"},{"name":"b","role":"operator","cert_cn":"x"}`), `cert_cn "x" is already used`},
		{"DuplicateQueue", ok(`{"name":"w","role":"worker","token_sha256":"` + h + `","task_queues":["a","a"]}`), "listed twice"},
		{"ControlCharacter", ok(`{"name":"w\u0007","role":"worker","token_sha256":"` + h + `"}`), "name must not contain U+0007 (a control character) at byte offset 1"},
		{"BidiOverride", ok(`{"name":"w\u202e","role":"worker","token_sha256":"` + h + `"}`), "name must not contain U+202E RIGHT-TO-LEFT OVERRIDE"},
		{"TrailingSpace", ok(`{"name":"w ","role":"worker","token_sha256":"` + h + `"}`), "name must not end with a space"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids, err := ParseAuthFile([]byte(tc.file))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if ids.Len() != 2 || !ids.UsesCertificates() {
					t.Errorf("parsed %d principals (certificates: %v)", ids.Len(), ids.UsesCertificates())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

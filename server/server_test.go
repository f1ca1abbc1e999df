package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// testMaxPayload is small so the tests can send payloads over the limit
// cheaply.
const testMaxPayload = 1024

// shared is the one server the tests talk to: Badger allocates its memtables
// up front, so one in-memory store for the package keeps the tests light.
// Tests use ids of their own, so they can share it and run in parallel.
var shared struct {
	once   sync.Once
	client durablev1.DurableClient
	err    error
	stop   func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

// setup returns a client of a Server over a real engine on in-memory Badger,
// served on 127.0.0.1:0.
func setup(t *testing.T) durablev1.DurableClient {
	t.Helper()
	shared.once.Do(func() { shared.client, shared.stop, shared.err = serve() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.client
}

func serve() (durablev1.DurableClient, func(), error) {
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		return nil, nil, err
	}
	e, err := engine.New(st, engine.Options{
		PollTimeout: 2 * time.Second, DLQAfterAttempts: 2, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	// Internal errors are logged; let them show in the test output.
	opts := Options{MaxPayload: testMaxPayload, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), TokenKey: testTokenKey}
	gs := New(e, opts).NewGRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		st.Close()
		return nil, nil, err
	}
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		e.Close()
		st.Close()
		return nil, nil, err
	}
	stop := func() {
		conn.Close()
		e.Close()
		gs.Stop()
		st.Close()
	}
	return durablev1.NewDurableClient(conn), stop, nil
}

var ids atomic.Int64

// uid returns prefix with a suffix no other call in this process returns, so
// tests (and -count repetitions) on the shared server never collide.
func uid(prefix string) string { return prefix + "-" + strconv.FormatInt(ids.Add(1), 10) }

// testTokenKey is the token key of the shared server, so tests can seal
// tokens of their own.
var testTokenKey = []byte("0123456789abcdef0123456789abcdef")

// token seals a task token for the local principal, as the shared server
// would; activityID "" makes a workflow task token.
func token(t *testing.T, workflowID, activityID string) []byte {
	t.Helper()
	b, err := proto.Marshal(&durablev1.TaskToken{WorkflowId: workflowID, ActivityId: activityID, Attempt: 1, LeaseId: 1})
	if err != nil {
		t.Fatal(err)
	}
	return sealToken(testTokenKey, LocalPrincipal.Name, b)
}

// badInput is one row of a per-RPC table: the request, the code it must get,
// and the field the status message must name ("" when the code is all that
// matters).
type badInput[Req any] struct {
	name  string
	req   Req
	code  codes.Code
	field string
}

// runBadInputs calls each row over gRPC and checks the code, that the
// message names the field, and that an InvalidArgument carries a BadRequest
// detail for exactly that field.
func runBadInputs[Req, Resp any](t *testing.T, call func(context.Context, Req, ...grpc.CallOption) (Resp, error), rows []badInput[Req]) {
	t.Helper()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := call(ctx, tc.req)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code = %v (%q), want %v", st.Code(), st.Message(), tc.code)
			}
			if tc.field == "" {
				return
			}
			if !strings.HasPrefix(st.Message(), tc.field+": ") {
				t.Errorf("message %q does not name field %q", st.Message(), tc.field)
			}
			if tc.code != codes.InvalidArgument {
				return
			}
			var found bool
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						found = found || v.GetField() == tc.field
					}
				}
			}
			if !found {
				t.Errorf("no BadRequest field violation for %q in %v", tc.field, st.Details())
			}
		})
	}
}

func over(n int) []byte { return make([]byte, n+1) }

func TestToStatusMapsWrappedErrors(t *testing.T) {
	t.Parallel()
	s := New(nil, Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	ctx := context.Background()
	wrap := func(err error) error { return errors.Join(errors.New("context"), err) }
	cases := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"NotFound", wrap(engine.ErrNotFound), codes.NotFound},
		{"AlreadyExists", wrap(engine.ErrAlreadyExists), codes.AlreadyExists},
		{"StaleTask", wrap(engine.ErrStaleTask), codes.FailedPrecondition},
		{"NotDeadLettered", wrap(engine.ErrNotDeadLettered), codes.FailedPrecondition},
		{"WorkflowClosed", wrap(engine.ErrWorkflowClosed), codes.FailedPrecondition},
		{"OperationFinished", wrap(engine.ErrOperationFinished), codes.FailedPrecondition},
		{"Closed", wrap(engine.ErrClosed), codes.Unavailable},
		{"NoSpace", wrap(fmt.Errorf("%w: 1 MiB free", engine.ErrNoSpace)), codes.ResourceExhausted},
		{"WritesRefused", wrap(fmt.Errorf("%w: a sync failed", engine.ErrWritesRefused)), codes.Unavailable},
		{"WritesRefusedForSpace", wrap(fmt.Errorf("%w: %w", engine.ErrWritesRefused, engine.ErrNoSpace)), codes.ResourceExhausted},
		{"Invalid", wrap(&engine.InvalidError{Field: "commands[0].activity_id", Reason: "taken"}), codes.InvalidArgument},
		{"Canceled", wrap(context.Canceled), codes.Canceled},
		{"DeadlineExceeded", wrap(context.DeadlineExceeded), codes.DeadlineExceeded},
		{"StreamStatus", wrap(status.Error(codes.Unavailable, "transport closing")), codes.Unavailable},
		{"Unknown", errors.New("disk on fire"), codes.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := status.Convert(s.toStatus(ctx, "Test", tc.err))
			if got.Code() != tc.code {
				t.Fatalf("code = %v, want %v (%q)", got.Code(), tc.code, got.Message())
			}
		})
	}
	if err := s.toStatus(ctx, "Test", nil); err != nil {
		t.Errorf("toStatus(nil) = %v", err)
	}
	st := status.Convert(s.toStatus(ctx, "Test", &engine.InvalidError{Field: "activity_id", Reason: "taken"}))
	if !strings.HasPrefix(st.Message(), "activity_id: ") {
		t.Errorf("engine InvalidError message %q does not name its field", st.Message())
	}
}

func TestGRPCOptionsLeaveRoomForSeveralPayloads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		payload int
		want    int
	}{
		{0, 4*DefaultMaxPayload + 1<<20},
		{1024, 4*1024 + 1<<20},
		{1 << 40, 1<<31 - 1},
	}
	for _, tc := range cases {
		if got := maxRecvMsgSize(Options{MaxPayload: tc.payload}.withDefaults().MaxPayload); got != tc.want {
			t.Errorf("maxRecvMsgSize(%d) = %d, want %d", tc.payload, got, tc.want)
		}
	}
	if n := len(grpcOptions(Options{})); n == 0 {
		t.Error("grpcOptions returned no options")
	}
}

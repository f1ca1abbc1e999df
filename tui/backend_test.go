package tui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
)

// TestBackendAgainstADaemonWithAuth runs the client-backed Backend against a
// real daemon with a reader and an operator: what each may do, and the words
// the console shows for what they may not.
func TestBackendAgainstADaemonWithAuth(t *testing.T) {
	t.Parallel()
	sum := func(token string) string { h := sha256.Sum256([]byte(token)); return hex.EncodeToString(h[:]) }
	ids, err := server.ParseAuthFile(fmt.Appendf(nil, `{"principals": [
		{"name": "dash", "role": "reader", "token_sha256": %q},
		{"name": "ana", "role": "operator", "token_sha256": %q}]}`, sum("reader-token"), sum("operator-token")))
	if err != nil {
		t.Fatal(err)
	}
	addr := testdaemon.StartServer(t, engine.Options{}, server.Options{Auth: server.NewAuthFrom(ids)})
	backend := func(token string) Backend {
		var opts []client.Option
		if token != "" {
			opts = append(opts, client.WithToken(token))
		}
		c, err := client.New(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return NewBackend(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	letter := RedriveListParams{Refs: []*durablev1.ActivityRef{{WorkflowId: "order-1", ActivityId: "1"}}, Reason: "INC-7", PerSecond: 50}

	t.Run("WithoutATokenTheStreamIsRefused", func(t *testing.T) {
		s, err := backend("").Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if got := errorText(err); !strings.HasPrefix(got, "unauthenticated: ") {
			t.Fatalf("Recv = %q, want unauthenticated", got)
		}
	})

	t.Run("AReaderWatchesAndReadsTheAuditLogButMayNotRedrive", func(t *testing.T) {
		reader := backend("reader-token")
		s, err := reader.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
				break
			}
		}
		if _, err := reader.AuditLog(ctx, auditLoadLimit); err != nil {
			t.Fatalf("AuditLog: %v", err)
		}
		want := `permission denied: principal "dash" (role reader) may not call RedriveDeadLetters`
		if _, err := reader.RedriveList(ctx, letter); err == nil || !strings.HasPrefix(errorText(err), want) {
			t.Fatalf("RedriveList = %v, want %q", err, want)
		}
		if err := reader.Redrive(ctx, "order-1", "1", ""); err == nil || !strings.HasPrefix(errorText(err), "permission denied: ") {
			t.Fatalf("Redrive = %v, want permission denied", err)
		}
	})

	t.Run("AnOperatorsBulkRedriveIsOneRecordOnTheStreamAndInTheLog", func(t *testing.T) {
		op := backend("operator-token")
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		s, err := op.Watch(wctx)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
				break
			}
		}
		// No such letter: the operation is recorded, matches nothing and
		// is done at once.
		resp, err := op.RedriveList(ctx, letter)
		if err != nil || resp.GetMatched() != 0 || resp.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED || resp.GetAuditId() == 0 {
			t.Fatalf("RedriveList = %v, %v; want a completed operation that matched nothing, with an audit id", resp, err)
		}
		var pushed *durablev1.AuditRecord
		for pushed == nil || !pushed.GetDone() {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			for _, r := range ev.GetAuditRecords() {
				if r.GetId() == resp.GetAuditId() {
					pushed = r
				}
			}
		}
		recs, err := op.AuditLog(ctx, auditLoadLimit)
		if err != nil || len(recs) == 0 {
			t.Fatalf("AuditLog = %v, %v", recs, err)
		}
		for _, r := range []*durablev1.AuditRecord{pushed, recs[0]} {
			if r.GetId() != resp.GetAuditId() || r.GetPrincipal() != "ana" || r.GetReason() != "INC-7" || r.GetRpc() != "RedriveDeadLetters" {
				t.Fatalf("record %v, want #%d by ana for INC-7", r, resp.GetAuditId())
			}
		}
		stop()
		if _, err := s.Recv(); err == nil {
			t.Fatal("Recv after the stream's context ended returned no error")
		}
	})
}

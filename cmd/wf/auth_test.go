package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testcert"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
)

// The principals of the auth tests, with their tokens in clear.
var (
	opsPrincipal    = principal{name: "ops", role: "operator", token: "ops-token-4b1d"}
	readerPrincipal = principal{name: "dash", role: "reader", token: "dash-token-77c0"}
)

// workerPrincipal may work the given task queues.
func workerPrincipal(queues ...string) principal {
	return principal{name: "w", role: "worker", token: "worker-token-9e2a", queues: queues}
}

func TestConnectionFlags(t *testing.T) {
	t.Parallel()
	worker := workerPrincipal("flags")
	ids, err := server.ParseAuthFile(authFile(t, opsPrincipal, readerPrincipal, worker))
	if err != nil {
		t.Fatal(err)
	}
	addr := testdaemon.StartServer(t, engine.Options{}, server.Options{Auth: server.NewAuthFrom(ids)})
	newDriver(t, dial(t, addr, client.WithToken(worker.token)), "flags").deadLetter("flags-wf")

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "ops-token")
	if err := os.WriteFile(tokenFile, []byte(opsPrincipal.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name  string
		args  []string
		code  int
		wants []string // fragments of stderr, or of stdout on success
	}{
		{"NoToken", []string{"list"}, exitFailed, []string{"(Unauthenticated)", "no credentials", "--token or DURABLE_TOKEN"}},
		{"UnknownToken", []string{"list", "--token", "not-a-token"}, exitFailed, []string{"Unauthenticated", "wf sent the token of --token"}},
		{"ReaderLists", []string{"--token", readerPrincipal.token, "dlq", "list"}, exitOK, []string{"flags-wf", "1 dead letter"}},
		{"ReaderReadsAudit", []string{"audit", "--token", readerPrincipal.token}, exitOK, []string{"No audit records."}},
		{"ReaderMayNotRedrive", []string{"dlq", "redrive", "flags-wf", "1", "--token", readerPrincipal.token}, exitFailed,
			[]string{`principal "dash" (role reader) may not call RedriveDeadLetter`, "PermissionDenied"}},
		{"ReaderMayNotRedriveAll", []string{"--token", readerPrincipal.token, "--json", "dlq", "redrive", "--all"}, exitFailed,
			[]string{`principal "dash" (role reader) may not call RedriveDeadLetters`, "PermissionDenied"}},
		{"WorkerMayNotReadAudit", []string{"--token", worker.token, "audit"}, exitFailed,
			[]string{`principal "w" (role worker) may not call ListAuditRecords`}},
		{"OperatorTokenFile", []string{"--token-file", tokenFile, "describe", "flags-wf"}, exitOK, []string{"flags-wf", "dead-lettered"}},
		{"MissingTokenFile", []string{"--token-file", filepath.Join(dir, "nope"), "list"}, exitUsage, []string{"token file"}},
		{"TokenAndTokenFile", []string{"--token", "x", "--token-file", tokenFile, "list"}, exitUsage, []string{"not both"}},
		{"MissingCA", []string{"list", "--tls-ca", missing}, exitUsage, []string{"missing.pem"}},
		{"CertWithoutKey", []string{"--tls-cert", missing, "list"}, exitUsage, []string{"key"}},
		// The daemon speaks plain gRPC: the handshake fails, and says why.
		{"TLSAgainstPlaintext", []string{"--tls", "--token", readerPrincipal.token, "list"}, exitUnreachable,
			[]string{"handshake", "--tls-ca"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := wf(t, append([]string{"--addr", addr}, tt.args...)...).wantCode(t, tt.code)
			out := r.stderr
			if tt.code == exitOK {
				out = r.stdout
			} else if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("stderr is not one line:\n%s", r.stderr)
			}
			mustContain(t, out, tt.wants...)
		})
	}
}

func TestTokenFromEnvironment(t *testing.T) {
	// Not parallel: it sets wf's environment.
	ids, err := server.ParseAuthFile(authFile(t, opsPrincipal, readerPrincipal))
	if err != nil {
		t.Fatal(err)
	}
	addr := testdaemon.StartServer(t, engine.Options{}, server.Options{Auth: server.NewAuthFrom(ids)})
	setEnv(t, map[string]string{"DURABLE_ADDR": addr, "DURABLE_TOKEN": readerPrincipal.token})
	wf(t, "list").wantCode(t, exitOK)
	r := wf(t, "dlq", "redrive", "x", "1").wantCode(t, exitFailed)
	mustContain(t, r.stderr, `principal "dash" (role reader)`)
	// A flag wins over the variable.
	r = wf(t, "list", "--token", "not-a-token").wantCode(t, exitFailed)
	mustContain(t, r.stderr, "wf sent the token of --token")

	setEnv(t, map[string]string{"DURABLE_ADDR": addr, "DURABLE_TOKEN": "not-a-token"})
	r = wf(t, "list").wantCode(t, exitFailed)
	mustContain(t, r.stderr, "wf sent the token of DURABLE_TOKEN")
}

// TestAuditRecordsEveryRedrive runs durabled with an auth file, redrives as
// an operator once by hand and once in bulk, and reads both back from the
// audit log: who, role, why, what was selected, how many; then SIGKILLs the
// daemon and reads the same records after the restart.
func TestAuditRecordsEveryRedrive(t *testing.T) {
	// Not parallel: it sets wf's environment.
	queues := []string{"audit-a", "audit-b", "audit-c"}
	worker := workerPrincipal(queues...)
	dir := t.TempDir()
	authPath := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(authPath, authFile(t, opsPrincipal, worker), 0o600); err != nil {
		t.Fatal(err)
	}
	d := testdaemon.Exec(t, filepath.Join(dir, "data"), "--auth", authPath)

	wc := dial(t, d.Addr, client.WithToken(worker.token))
	for _, q := range queues {
		newDriver(t, wc, q).deadLetter(q) // activity 1 dead-letters with failure type Boom
	}
	ops := []string{"--addr", d.Addr, "--token", opsPrincipal.token}
	wf(t, append(ops, "dlq", "redrive", "audit-a", "1", "--reason", "INC-1 single")...).wantCode(t, exitOK)
	r := wf(t, append(ops, "--json", "dlq", "redrive", "--all", "--failure-type", "Boom", "--reason", "INC-1 bulk", "--wait")...).wantCode(t, exitOK)
	var op durablev1.Operation
	unmarshal(t, r.stdout, &op)
	if op.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED || op.GetMatched() != 2 || op.GetReleased() != 2 || op.GetAuditId() == 0 || op.GetPrincipal() != "ops" {
		t.Fatalf("redrive --all --wait = %s", r.stdout)
	}

	// The token from the environment this time, as scripts pass it.
	audit := func() []*durablev1.AuditRecord {
		t.Helper()
		setEnv(t, map[string]string{"DURABLE_ADDR": d.Addr, "DURABLE_TOKEN": opsPrincipal.token})
		return auditRecords(t, wf(t, "--json", "audit").wantCode(t, exitOK).stdout)
	}
	before := audit()
	if len(before) != 2 {
		t.Fatalf("%d audit records, want 2: %v", len(before), before)
	}
	bulk, single := before[0], before[1]
	for _, rec := range before {
		if rec.GetPrincipal() != "ops" || rec.GetRole() != "operator" || !rec.GetDone() || rec.GetTime() == nil {
			t.Errorf("record %d: principal %q, role %q, done %v, time %v; want ops, operator, done, a time",
				rec.GetId(), rec.GetPrincipal(), rec.GetRole(), rec.GetDone(), rec.GetTime())
		}
	}
	if single.GetRpc() != "RedriveDeadLetter" || single.GetReason() != "INC-1 single" || single.GetCount() != 1 || single.GetMatched() != 1 ||
		len(single.GetActivities()) != 1 || single.GetActivities()[0].GetWorkflowId() != "audit-a" || single.GetFilter() != nil {
		t.Errorf("single redrive record = %v", single)
	}
	if bulk.GetId() != op.GetAuditId() || bulk.GetOperationId() != op.GetId() || bulk.GetRpc() != "RedriveDeadLetters" || bulk.GetReason() != "INC-1 bulk" ||
		bulk.GetFilter().GetFailureType() != "Boom" || bulk.GetFilter().GetWorkflowId() != "" || bulk.GetCount() != 2 || bulk.GetMatched() != 2 ||
		len(bulk.GetActivities()) != 2 {
		t.Errorf("bulk redrive record = %v (redrive --all said audit #%d)", bulk, op.GetAuditId())
	}

	d.Kill()
	d.Restart()
	after := audit()
	if len(after) != len(before) {
		t.Fatalf("after a SIGKILL and restart: %d records, want %d", len(after), len(before))
	}
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Errorf("record %d changed across the restart:\nbefore %v\nafter  %v", i, before[i], after[i])
		}
	}
}

// TestTLSConnection runs durabled with TLS and auth, as a team runs it, and
// checks that every certificate problem is "unreachable" (exit 3) with the
// reason visible.
func TestTLSConnection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "durable test CA")
	srv := ca.WriteFiles(t, dir, "durabled", "durabled", "127.0.0.1", "durable.test")
	other := testcert.NewCA(t, "some other CA").WriteFiles(t, dir, "other", "other")
	authPath := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(authPath, authFile(t, opsPrincipal), 0o600); err != nil {
		t.Fatal(err)
	}
	d := testdaemon.Exec(t, filepath.Join(dir, "data"), "--tls-cert", srv.Cert, "--tls-key", srv.Key, "--auth", authPath)

	tests := []struct {
		name  string
		args  []string
		code  int
		wants []string // fragments of stderr, or of stdout on success
	}{
		{"Verified", []string{"--tls-ca", srv.CA, "audit"}, exitOK, []string{"No audit records."}},
		{"ServerName", []string{"--tls-ca", srv.CA, "--tls-server-name", "durable.test", "audit"}, exitOK, []string{"No audit records."}},
		{"WrongServerName", []string{"--tls-ca", srv.CA, "--tls-server-name", "elsewhere.test", "audit"}, exitUnreachable,
			[]string{"elsewhere.test", "--tls-server-name"}},
		{"OtherCA", []string{"--tls-ca", other.CA, "audit"}, exitUnreachable, []string{"unknown authority", "--tls-ca"}},
		{"SystemRoots", []string{"--tls", "audit"}, exitUnreachable, []string{"certificate"}},
		{"Plaintext", []string{"audit"}, exitUnreachable, []string{"--tls if it serves TLS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := wf(t, append([]string{"--addr", d.Addr, "--token", opsPrincipal.token}, tt.args...)...).wantCode(t, tt.code)
			out := r.stderr
			if tt.code == exitOK {
				out = r.stdout
			} else if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("stderr is not one line:\n%s", r.stderr)
			}
			mustContain(t, out, tt.wants...)
		})
	}
}

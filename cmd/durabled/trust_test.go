package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testcert"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
)

// connect dials addr with opts and makes one read call; it returns the
// dial's or the call's error.
func connect(t *testing.T, addr string, opts ...client.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ListWorkflows(ctx, durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED)
	return err
}

// servedSerial is the serial number of the certificate a new TLS
// connection to addr is served.
func servedSerial(t *testing.T, addr string, roots []byte) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSAndMutualTLS runs durabled with TLS, then with client
// certificates required, and talks to it as clients with and without the
// right material; then rotates the server certificate under it.
func TestTLSAndMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := testcert.NewCA(t, "durable test CA"), testcert.NewCA(t, "another CA")
	srv := ca.WriteFiles(t, dir, "server", "durabled", "127.0.0.1")
	alice := ca.WriteFiles(t, dir, "alice", "alice")
	mallory := other.WriteFiles(t, dir, "mallory", "alice") // the right name, the wrong CA
	wrongCA := other.WriteFiles(t, dir, "wrong", "x")

	t.Run("TLS", func(t *testing.T) {
		d := testdaemon.Exec(t, filepath.Join(dir, "tls-data"), "--tls-cert", srv.Cert, "--tls-key", srv.Key)
		if err := connect(t, d.Addr); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("plaintext client of a TLS daemon: %v, want ErrUnreachable", err)
		}
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: wrongCA.CA})); !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("client that trusts another CA: %v, want ErrUnreachable about the certificate", err)
		}
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: srv.CA})); err != nil {
			t.Errorf("TLS client: %v", err)
		}

		// Rotation: a new pair renamed into place is served to the next
		// connection, without a restart.
		before := servedSerial(t, d.Addr, ca.PEM)
		cert, key := ca.Issue(t, "durabled", "127.0.0.1")
		for path, b := range map[string][]byte{srv.Key: key, srv.Cert: cert} {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
		want := testcert.Serial(t, cert).String()
		if got := servedSerial(t, d.Addr, ca.PEM); got != want || got == before {
			t.Errorf("after rotation the daemon serves serial %s, want the new %s (old %s)", got, want, before)
		}
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: srv.CA})); err != nil {
			t.Errorf("TLS client after rotation: %v", err)
		}
	})

	t.Run("MutualTLS", func(t *testing.T) {
		d := testdaemon.Exec(t, filepath.Join(dir, "mtls-data"), "--tls-cert", srv.Cert, "--tls-key", srv.Key, "--tls-client-ca", srv.CA)
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: srv.CA})); err == nil {
			t.Error("a client without a certificate got through")
		}
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: srv.CA, CertFile: mallory.Cert, KeyFile: mallory.Key})); err == nil {
			t.Error("a client certificate from another CA got through")
		}
		if err := connect(t, d.Addr, client.WithTLS(client.TLSFiles{CAFile: srv.CA, CertFile: alice.Cert, KeyFile: alice.Key})); err != nil {
			t.Errorf("a client certificate from the CA: %v", err)
		}
	})

	t.Run("CertificatePrincipals", func(t *testing.T) {
		authFile := filepath.Join(dir, "auth.json")
		writeFile(t, authFile, `{"principals": [{"name": "alice", "role": "reader", "cert_cn": "alice"}]}`)
		d := testdaemon.Exec(t, filepath.Join(dir, "cn-data"), "--tls-cert", srv.Cert, "--tls-key", srv.Key, "--tls-client-ca", srv.CA, "--auth", authFile)
		asAlice := client.WithTLS(client.TLSFiles{CAFile: srv.CA, CertFile: alice.Cert, KeyFile: alice.Key})
		if err := connect(t, d.Addr, asAlice); err != nil {
			t.Fatalf("alice reads: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, d.Addr, asAlice)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Redrive(ctx, "wf", "1")
		if st := status.Convert(errors.Unwrap(err)); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `principal "alice" (role reader) may not call RedriveDeadLetter`) {
			t.Errorf("alice redrives: %v, want PermissionDenied naming alice, her role and the RPC", err)
		}
	})
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestListenOffLoopbackNeedsAuthOrInsecure: durabled refuses a listen
// address other hosts can reach unless it has an auth file, or --insecure
// says the risk is taken, which it then repeats at every start.
func TestListenOffLoopbackNeedsAuthOrInsecure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"--listen", listen, "--data", filepath.Join(dir, "refused")}, &stdout, &stderr)
		if code == exitOK || !strings.Contains(stderr.String(), "--auth") || !strings.Contains(stderr.String(), "--insecure") {
			t.Errorf("--listen %s without --auth: exit %d, stderr %q; want a refusal that says how to configure it", listen, code, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "refused")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused start created its data dir: %v", err)
	}
	d := testdaemon.Exec(t, filepath.Join(dir, "insecure"), "--listen", "0.0.0.0:0", "--insecure")
	if !strings.Contains(d.Logs(), "level=WARN") || !strings.Contains(d.Logs(), "--insecure") {
		t.Errorf("--insecure started without a warning:\n%s", d.Logs())
	}
	authFile := filepath.Join(dir, "auth.json")
	writeFile(t, authFile, `{"principals": [{"name": "ops", "role": "operator", "token_sha256": "`+hashOf("t")+`"}]}`)
	testdaemon.Exec(t, filepath.Join(dir, "auth"), "--listen", "0.0.0.0:0", "--auth", authFile)
	testdaemon.Exec(t, filepath.Join(dir, "localhost"), "--listen", "localhost:0")
}

// TestAuthFileReloadsOnSIGHUP: a principal added to the file is let in
// after SIGHUP, one removed is shut out, and a broken file leaves the last
// good one in force.
func TestAuthFileReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	entry := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "role": "reader", "token_sha256": %q}`, name, hashOf("token-"+name))
	}
	writeFile(t, authFile, `{"principals": [`+entry("old")+`]}`)
	d := testdaemon.Exec(t, filepath.Join(dir, "data"), "--auth", authFile)
	as := func(name string) error { return connect(t, d.Addr, client.WithToken("token-"+name)) }
	if err := as("old"); err != nil {
		t.Fatalf("old: %v", err)
	}
	if err := as("new"); status.Code(errors.Unwrap(err)) != codes.Unauthenticated {
		t.Fatalf("new before the reload: %v, want Unauthenticated", err)
	}
	writeFile(t, authFile, `{"principals": [`+entry("new")+`]}`)
	hup := func(wantLog string) {
		t.Helper()
		if err := d.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Count(d.Logs(), wantLog) > 0 }, "log line "+wantLog)
	}
	hup("auth file reloaded")
	if err := as("new"); err != nil {
		t.Errorf("new after the reload: %v", err)
	}
	if err := as("old"); status.Code(errors.Unwrap(err)) != codes.Unauthenticated {
		t.Errorf("old after the reload: %v, want Unauthenticated", err)
	}
	writeFile(t, authFile, `{"principals": [`)
	hup("auth file not reloaded")
	if err := as("new"); err != nil {
		t.Errorf("new after a broken file: %v, want the last good file in force", err)
	}
}

// TestTokenKeySurvivesRestart: the key task tokens are sealed with is made
// once, readable by its owner only, and kept: a worker holding a lease when
// the daemon is SIGKILLed can still report on it after the restart.
func TestTokenKeySurvivesRestart(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	d := testdaemon.Exec(t, dataDir)
	info, err := os.Stat(filepath.Join(dataDir, server.TokenKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("token key mode %v, want 0600", perm)
	}
	key, _ := os.ReadFile(filepath.Join(dataDir, server.TokenKeyFile))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := rawClient(t, d.Addr)
	if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
	}}}); err != nil {
		t.Fatal(err)
	}
	at, err := svc.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q"})
	if err != nil || len(at.GetTasks()) != 1 {
		t.Fatalf("poll activity: %v, %v", at, err)
	}
	// The lease is not synced when it is handed out; a durable call after it
	// makes sure the restart finds it.
	if _, err := svc.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: at.GetTasks()[0].GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	d.Kill()
	d.Restart()
	if again, _ := os.ReadFile(filepath.Join(dataDir, server.TokenKeyFile)); !bytes.Equal(again, key) {
		t.Error("the token key changed across a restart")
	}
	svc = rawClient(t, d.Addr)
	if _, err := svc.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: at.GetTasks()[0].GetTaskToken(), Result: []byte(`"ok"`)}); err != nil {
		t.Errorf("completing a lease from before the restart: %v", err)
	}
}

func rawClient(t *testing.T, addr string) durablev1.DurableClient {
	t.Helper()
	return durablev1.NewDurableClient(dial(t, addr))
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTokenCommandMakesAWorkingPrincipal: the entry "durabled token"
// prints, pasted into an auth file, lets its token in with its role.
func TestTokenCommandMakesAWorkingPrincipal(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"token", "--name", "dash", "--role", "reader"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("durabled token: exit %d: %s", code, stderr.String())
	}
	var token, entry string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "token "); ok {
			token = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "principal "); ok {
			entry = strings.TrimSpace(v)
		}
	}
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	writeFile(t, authFile, `{"principals": [`+entry+`]}`)
	d := testdaemon.Exec(t, filepath.Join(dir, "data"), "--auth", authFile)
	if err := connect(t, d.Addr, client.WithToken(token)); err != nil {
		t.Errorf("the printed token: %v", err)
	}
	if err := connect(t, d.Addr); status.Code(errors.Unwrap(err)) != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", err)
	}
}

// TestCertificatePrincipalsNeedAClientCA: an auth file that names
// certificate principals is refused without --tls-client-ca, which is what
// would verify them.
func TestCertificatePrincipalsNeedAClientCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	writeFile(t, authFile, `{"principals": [{"name": "alice", "role": "operator", "cert_cn": "alice"}]}`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--auth", authFile}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--tls-client-ca") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --tls-client-ca", code, stderr.String())
	}
}

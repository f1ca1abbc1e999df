package tlsfile

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/internal/testcert"
)

// write replaces path's contents and moves its modification time on, so a
// rewrite within the file system's timestamp granularity is still seen.
func write(t *testing.T, path string, b []byte, age time.Duration) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(age)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestKeyPairReloadsWhenFilesChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "ca")
	certFile, keyFile := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	c1, k1 := ca.Issue(t, "first")
	write(t, certFile, c1, -time.Hour)
	write(t, keyFile, k1, -time.Hour)
	var reloadErrs []error
	pair, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pair.OnReloadError = func(err error) { reloadErrs = append(reloadErrs, err) }
	cn := func() string { return pair.Certificate().Leaf.Subject.CommonName }
	if cn() != "first" {
		t.Fatalf("CN = %q", cn())
	}

	// A rotation caught half way (new certificate, old key) keeps the old
	// pair and is reported once.
	c2, k2 := ca.Issue(t, "second")
	write(t, certFile, c2, -time.Minute)
	if cn() != "first" || cn() != "first" {
		t.Errorf("a mismatched pair replaced the good one: CN %q", cn())
	}
	if len(reloadErrs) != 1 {
		t.Errorf("%d reload errors reported, want 1: %v", len(reloadErrs), reloadErrs)
	}
	write(t, keyFile, k2, -time.Minute)
	if cn() != "second" {
		t.Errorf("after the rotation finished: CN %q, want second", cn())
	}
	if _, err := LoadKeyPair(certFile, filepath.Join(dir, "missing.key")); err == nil {
		t.Error("LoadKeyPair with a missing key succeeded")
	}
}

func TestCertPoolReloadsAndRefusesEmptyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	write(t, file, []byte("not pem"), -time.Hour)
	if _, err := LoadCertPool(file); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("LoadCertPool of a file without PEM: %v", err)
	}
	a, b := testcert.NewCA(t, "a"), testcert.NewCA(t, "b")
	write(t, file, a.PEM, -time.Hour)
	pool, err := LoadCertPool(file)
	if err != nil {
		t.Fatal(err)
	}
	first := pool.Pool()
	write(t, file, b.PEM, -time.Minute)
	if second := pool.Pool(); second.Equal(first) {
		t.Error("the pool did not change with its file")
	}
}

// TestServerConfigRequiresClientCertificates runs a real TLS handshake over
// a pipe: with a client CA, a client without a certificate, or with one from
// another CA, is refused; one the CA issued gets through.
func TestServerConfigRequiresClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := testcert.NewCA(t, "ca"), testcert.NewCA(t, "other")
	srv := ca.WriteFiles(t, dir, "server", "server", "durabled.test")
	good := ca.WriteFiles(t, dir, "good", "alice")
	bad := other.WriteFiles(t, dir, "bad", "mallory")
	pair, err := LoadKeyPair(srv.Cert, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs, err := LoadCertPool(srv.CA)
	if err != nil {
		t.Fatal(err)
	}
	serverCfg := ServerConfig(pair, clientCAs)
	roots, err := LoadCertPool(srv.CA)
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(client *KeyPair) error {
		cc, sc := netPipe()
		defer cc.Close()
		defer sc.Close()
		done := make(chan error, 1)
		go func() {
			s := tls.Server(sc, serverCfg)
			err := s.Handshake()
			if err == nil {
				_, err = s.Write([]byte{1})
			}
			done <- err
		}()
		c := tls.Client(cc, ClientConfig(roots, client, "durabled.test"))
		cerr := c.Handshake()
		if cerr == nil {
			// TLS 1.3 clients finish before the server has checked their
			// certificate; the server's first byte, or its alert, is its
			// verdict.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, cerr = c.Read(make([]byte, 1))
		}
		if serr := <-done; serr != nil {
			return serr
		}
		return cerr
	}
	if err := handshake(nil); err == nil {
		t.Error("a client without a certificate got through")
	}
	badPair, err := LoadKeyPair(bad.Cert, bad.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(badPair); err == nil {
		t.Error("a client certificate from another CA got through")
	}
	goodPair, err := LoadKeyPair(good.Cert, good.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(goodPair); err != nil {
		t.Errorf("a client certificate from the CA was refused: %v", err)
	}
}

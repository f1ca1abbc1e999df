// Package tlsfile builds TLS configurations from PEM files and keeps them
// current: when a certificate, key or CA file changes on disk it is read again
// at the next handshake, so certificates rotate without a restart. A file
// that changed but does not load (a rotation caught half written) leaves the
// previous material in force and is tried again at the next handshake.
//
// Checking costs a stat of each file per handshake; gRPC connections are
// long-lived, so handshakes are rare. Connections keep the certificate they
// were made with until they reconnect.
package tlsfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// stamp is what tells a changed file from the one that was read: another
// file renamed into place (the usual way to rotate), or the same file
// rewritten.
type stamp struct {
	info os.FileInfo
}

func stampOf(path string) (stamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{info: info}, nil
}

func (s stamp) same(o stamp) bool {
	return s.info != nil && o.info != nil && os.SameFile(s.info, o.info) &&
		s.info.ModTime().Equal(o.info.ModTime()) && s.info.Size() == o.info.Size()
}

// KeyPair is a certificate and its private key, read from two PEM files.
type KeyPair struct {
	certFile, keyFile string
	// OnReloadError, if set, hears each failed reload once per change of
	// the files; the previous pair stays in force.
	OnReloadError func(error)

	mu      sync.Mutex
	stamps  [2]stamp
	cert    *tls.Certificate
	lastBad [2]stamp // the stamps of the last change that failed to load
}

// LoadKeyPair reads the pair now; it fails if the files do not hold a
// certificate and its matching key.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if _, err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// reload reads the files if they changed since the last read and reports
// whether it did. The caller holds no lock.
func (k *KeyPair) reload() (bool, error) {
	cs, err1 := stampOf(k.certFile)
	ks, err2 := stampOf(k.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		return false, fmt.Errorf("tls key pair: %w", err)
	}
	now := [2]stamp{cs, ks}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && now[0].same(k.stamps[0]) && now[1].same(k.stamps[1]) {
		return false, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		err = fmt.Errorf("tls key pair %s, %s: %w", k.certFile, k.keyFile, err)
		if k.cert != nil && !(now[0].same(k.lastBad[0]) && now[1].same(k.lastBad[1])) && k.OnReloadError != nil {
			k.OnReloadError(err)
		}
		k.lastBad = now
		return false, err
	}
	k.cert, k.stamps = &cert, now
	return true, nil
}

// Certificate returns the current pair, reading the files again first if
// they changed.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.reload() // on error the previous pair stays; OnReloadError heard it
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert
}

// GetCertificate serves the pair to TLS clients (tls.Config.GetCertificate).
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate presents the pair to TLS servers
// (tls.Config.GetClientCertificate).
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// CertPool is a set of CA certificates read from one PEM file.
type CertPool struct {
	file string
	// OnReloadError, if set, hears each failed reload once per change of
	// the file; the previous pool stays in force.
	OnReloadError func(error)

	mu      sync.Mutex
	stamp   stamp
	pool    *x509.CertPool
	lastBad stamp
}

// LoadCertPool reads the CA file now; it fails unless the file holds at
// least one PEM certificate.
func LoadCertPool(file string) (*CertPool, error) {
	p := &CertPool{file: file}
	if err := p.reload(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *CertPool) reload() error {
	st, err := stampOf(p.file)
	if err != nil {
		return fmt.Errorf("tls ca: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool != nil && st.same(p.stamp) {
		return nil
	}
	pem, err := os.ReadFile(p.file)
	if err == nil {
		pool := x509.NewCertPool()
		if pool.AppendCertsFromPEM(pem) {
			p.pool, p.stamp = pool, st
			return nil
		}
		err = errors.New("no PEM certificate in it")
	}
	err = fmt.Errorf("tls ca %s: %w", p.file, err)
	if p.pool != nil && !st.same(p.lastBad) && p.OnReloadError != nil {
		p.OnReloadError(err)
	}
	p.lastBad = st
	return err
}

// Pool returns the current pool, reading the file again first if it changed.
func (p *CertPool) Pool() *x509.CertPool {
	p.reload() // on error the previous pool stays; OnReloadError heard it
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pool
}

// ServerConfig returns the TLS configuration of a server that presents pair
// and, with clientCAs, requires every client to present a certificate that
// clientCAs verifies (mTLS). Both are checked for changes at each handshake.
func ServerConfig(pair *KeyPair, clientCAs *CertPool) *tls.Config {
	perHandshake := func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: pair.GetCertificate,
			NextProtos:     []string{"h2"}, // gRPC needs HTTP/2 by ALPN
		}
		if clientCAs != nil {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = clientCAs.Pool()
		}
		return c, nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: perHandshake}
}

// ClientConfig returns the TLS configuration of a client that verifies the
// server against ca (the system's roots when nil) and, with pair, presents
// that certificate when the server asks for one. serverName overrides the
// name checked against the server's certificate ("" means the host dialled).
func ClientConfig(ca *CertPool, pair *KeyPair, serverName string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != nil {
		c.RootCAs = ca.Pool()
	}
	if pair != nil {
		c.GetClientCertificate = pair.GetClientCertificate
	}
	return c
}

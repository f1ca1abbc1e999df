package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tinyllm/durable/internal/tlsfile"
	"github.com/tinyllm/durable/server"
)

// trust is what decides who may talk to the daemon: TLS, the auth file and
// whether the listen address is safe without them.
type trust struct {
	auth  *server.Auth
	creds []grpc.ServerOption
	mtls  bool
}

// setupTrust loads the auth file and the certificates, and refuses a
// configuration that would serve every payload to anyone who can reach the
// port. Warnings go to logger.
func setupTrust(cfg config, logger *slog.Logger) (*trust, error) {
	tr := &trust{}
	loopback, err := isLoopback(cfg.listen)
	if err != nil {
		return nil, err
	}
	if cfg.auth != "" {
		if tr.auth, err = server.NewAuth(cfg.auth); err != nil {
			return nil, err
		}
		if tr.auth.Identities().UsesCertificates() && cfg.tlsClientCA == "" {
			return nil, fmt.Errorf("the auth file %s has principals that authenticate by certificate (cert_cn), but there is no --tls-client-ca to verify client certificates with", cfg.auth)
		}
	}
	switch {
	case cfg.auth == "" && !loopback && !cfg.insecure:
		return nil, fmt.Errorf("refusing to serve %s without --auth: anyone who can reach it could read every payload, complete any task and redrive every dead letter.\n"+
			"Give --auth FILE with the principals allowed in (see \"Running durabled for a team\" in the README),\n"+
			"listen on loopback (--listen 127.0.0.1:7345), or pass --insecure to accept the risk", cfg.listen)
	case cfg.insecure && cfg.auth == "":
		logger.Warn("serving without authentication (--insecure): anyone who can reach the port may read every payload and act as an operator; give --auth FILE to name who may",
			"addr", cfg.listen)
	case cfg.insecure:
		logger.Warn("--insecure has no effect with --auth: every call must authenticate")
	}
	if cfg.auth != "" && cfg.tlsCert == "" && !loopback {
		logger.Warn("bearer tokens cross the network in clear without TLS; give --tls-cert and --tls-key", "addr", cfg.listen)
	}
	if cfg.tlsCert == "" {
		return tr, nil
	}
	pair, err := tlsfile.LoadKeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, err
	}
	pair.OnReloadError = func(err error) {
		logger.Error("the certificate files changed but do not load; still serving the previous certificate", "err", err)
	}
	var clientCAs *tlsfile.CertPool
	if cfg.tlsClientCA != "" {
		if clientCAs, err = tlsfile.LoadCertPool(cfg.tlsClientCA); err != nil {
			return nil, err
		}
		clientCAs.OnReloadError = func(err error) {
			logger.Error("the client CA file changed but does not load; still verifying with the previous CAs", "err", err)
		}
		tr.mtls = true
	}
	tr.creds = []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsfile.ServerConfig(pair, clientCAs)))}
	return tr, nil
}

// reloadOnHUP re-reads the auth file on every SIGHUP until stop is closed;
// a file that does not load leaves the previous one in force.
func (tr *trust) reloadOnHUP(logger *slog.Logger, stop <-chan struct{}) {
	if tr.auth == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-stop:
				return
			case <-hup:
				ids, err := tr.auth.Reload()
				if err != nil {
					logger.Error("auth file not reloaded; the previous one stays in force", "err", err)
					continue
				}
				logger.Info("auth file reloaded", "principals", ids.Len())
			}
		}
	}()
}

// isLoopback reports whether every address listen could bind is a loopback
// one: an empty host or an unspecified address (0.0.0.0, ::) is every
// interface, and a name counts only if all it resolves to is loopback.
func isLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	if host == "localhost" {
		return true, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", listen, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

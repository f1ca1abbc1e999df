package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tinyllm/durable/internal/tlsfile"
)

// TLSFiles name the PEM files of a TLS connection to the daemon.
type TLSFiles struct {
	// CAFile holds the CA certificates that verify the daemon's
	// certificate; empty means the system's roots.
	CAFile string
	// CertFile and KeyFile are this client's certificate and key, for a
	// daemon that requires client certificates (--tls-client-ca). Both or
	// neither. They are read again when they change, for long-running
	// workers whose certificates rotate.
	CertFile, KeyFile string
	// ServerName is the name checked against the daemon's certificate;
	// empty means the host of the address dialled.
	ServerName string
}

// WithTLS connects over TLS with the given files, which Dial and New load at
// once (a file that does not load is an error then, not at the first call).
func WithTLS(files TLSFiles) Option {
	return func(o *options) { o.tls = &files }
}

// WithTLSConfig connects over TLS configured by cfg, for setups TLSFiles
// does not cover.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.tlsConfig = cfg }
}

// WithToken sends token as a bearer token with every call: the daemon's
// auth file names the principal it belongs to. Without TLS the token
// crosses the network in clear, which is only fit for loopback.
func WithToken(token string) Option {
	return func(o *options) {
		if strings.ContainsAny(token, " \t\r\n") {
			o.err = errors.New("the token contains white space; check how it was copied")
		}
		o.token = token
	}
}

// transport returns the transport credentials the options ask for.
func (o *options) transport() (credentials.TransportCredentials, error) {
	switch {
	case o.tlsConfig != nil:
		return credentials.NewTLS(o.tlsConfig), nil
	case o.tls == nil:
		return insecure.NewCredentials(), nil
	}
	f := o.tls
	var ca *tlsfile.CertPool
	if f.CAFile != "" {
		var err error
		if ca, err = tlsfile.LoadCertPool(f.CAFile); err != nil {
			return nil, err
		}
	}
	var pair *tlsfile.KeyPair
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		var err error
		if pair, err = tlsfile.LoadKeyPair(f.CertFile, f.KeyFile); err != nil {
			return nil, err
		}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	return credentials.NewTLS(tlsfile.ClientConfig(ca, pair, f.ServerName)), nil
}

// bearer sends a token in the "authorization" metadata of every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that a daemon on loopback can use
// tokens without TLS; off-host, the daemon should serve TLS.
func (bearer) RequireTransportSecurity() bool { return false }

// connectError explains a connection that failed: the transport error gRPC
// kept (a refused connection, a failed TLS handshake), found by one call
// that fails fast.
func connectError(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		return errors.New("connection failed")
	}
	return fmt.Errorf("connection failed: %s", grpcMessage(err))
}

// grpcMessage is an error's status message without gRPC's "rpc error:" noise.
func grpcMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	return msg
}

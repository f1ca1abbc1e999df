package client

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Connection says where a daemon is and how to authenticate to it: what wf,
// wfui and the demo worker take as flags, each defaulting to an environment
// variable, so that one set of variables configures every tool.
type Connection struct {
	// Addr is host:port, or several separated by commas for nodes that
	// share one database (DURABLE_ADDR; default DefaultAddr). See SplitAddrs.
	Addr string
	// Token is a bearer token (DURABLE_TOKEN).
	Token string
	// TokenFile holds the bearer token, for secrets mounted as files
	// (DURABLE_TOKEN_FILE). Not together with Token.
	TokenFile string
	// TLS turns TLS on with the system's roots when no file below is given
	// (DURABLE_TLS=1).
	TLS bool
	// CAFile, CertFile and KeyFile are TLSFiles (DURABLE_TLS_CA,
	// DURABLE_TLS_CERT, DURABLE_TLS_KEY); any of them turns TLS on.
	CAFile, CertFile, KeyFile string
	// ServerName overrides the name checked against the daemon's
	// certificate (DURABLE_TLS_SERVER_NAME).
	ServerName string

	// addrGiven is set by the first --addr, which replaces the default;
	// each later one adds to the list.
	addrGiven bool
}

// ConnectionFromEnv returns the connection the environment describes;
// getenv is os.Getenv, or a stand-in in tests.
func ConnectionFromEnv(getenv func(string) string) Connection {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Connection{
		Addr:       getenv("DURABLE_ADDR"),
		Token:      getenv("DURABLE_TOKEN"),
		TokenFile:  getenv("DURABLE_TOKEN_FILE"),
		TLS:        getenv("DURABLE_TLS") == "1" || strings.EqualFold(getenv("DURABLE_TLS"), "true"),
		CAFile:     getenv("DURABLE_TLS_CA"),
		CertFile:   getenv("DURABLE_TLS_CERT"),
		KeyFile:    getenv("DURABLE_TLS_KEY"),
		ServerName: getenv("DURABLE_TLS_SERVER_NAME"),
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	return c
}

// RegisterFlags adds --addr, --token, --token-file, --tls, --tls-ca,
// --tls-cert, --tls-key and --tls-server-name to fs, with c's values as
// defaults; parsing fs sets them in c. --addr may be repeated, or take a
// comma-separated list, to name several nodes: the first --addr replaces the
// default (DURABLE_ADDR), later ones add to it, across every FlagSet c is
// registered on.
func (c *Connection) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(addrFlag{c}, "addr", "daemon address `host:port`; several nodes of one database as a comma-separated list or by repeating --addr (env DURABLE_ADDR)")
	fs.StringVar(&c.Token, "token", c.Token, "bearer `token` naming this client's principal (env DURABLE_TOKEN; the variable keeps it out of the process list)")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "read the bearer token from `file` (env DURABLE_TOKEN_FILE)")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "connect with TLS, verifying the daemon with the system's roots (env DURABLE_TLS=1); implied by the --tls-* files")
	fs.StringVar(&c.CAFile, "tls-ca", c.CAFile, "PEM `file` of the CA that signed the daemon's certificate (env DURABLE_TLS_CA)")
	fs.StringVar(&c.CertFile, "tls-cert", c.CertFile, "PEM `file` of this client's certificate, for a daemon that requires one (env DURABLE_TLS_CERT)")
	fs.StringVar(&c.KeyFile, "tls-key", c.KeyFile, "PEM `file` of this client's private key (env DURABLE_TLS_KEY)")
	fs.StringVar(&c.ServerName, "tls-server-name", c.ServerName, "`name` to verify the daemon's certificate against, if not the host dialled (env DURABLE_TLS_SERVER_NAME)")
}

// UsesTLS reports whether c connects with TLS: --tls, or any TLS file or
// server name.
func (c Connection) UsesTLS() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// Options returns the client options for c: TLS when UsesTLS, and the
// bearer token. Errors wrap ErrConfig.
func (c Connection) Options() ([]Option, error) {
	opts, err := c.options()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return opts, nil
}

func (c Connection) options() ([]Option, error) {
	var opts []Option
	if c.UsesTLS() {
		opts = append(opts, WithTLS(TLSFiles{CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, ServerName: c.ServerName}))
	}
	token := c.Token
	switch {
	case c.Token != "" && c.TokenFile != "":
		return nil, errors.New("give a token or a token file, not both (check DURABLE_TOKEN and DURABLE_TOKEN_FILE)")
	case c.TokenFile != "":
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("token file %s is empty", c.TokenFile)
		}
	}
	if token != "" {
		opts = append(opts, WithToken(token))
	}
	return opts, nil
}

// addrFlag is --addr: the first one given replaces the default, each later
// one is added to the list.
type addrFlag struct{ c *Connection }

func (f addrFlag) String() string {
	if f.c == nil {
		return ""
	}
	return f.c.Addr
}

func (f addrFlag) Set(s string) error {
	if _, err := SplitAddrs(s); err != nil {
		return err
	}
	if f.c.addrGiven {
		f.c.Addr += "," + s
	} else {
		f.c.Addr, f.c.addrGiven = s, true
	}
	return nil
}

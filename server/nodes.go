package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// DefaultNodeAliveWithin is the liveness rule ListNodes applies when
// Options.NodeAliveWithin is zero: the PostgreSQL store's (a node heartbeats
// about once a second and is alive while heard from within 5 s). durabled
// passes the store's own value.
const DefaultNodeAliveWithin = 5 * time.Second

// MaxNodeNameLen bounds a node name: it is a metrics label and a column of
// the nodes table.
const MaxNodeNameLen = 128

// CheckNodeName checks a node name (durabled --node): 1 to MaxNodeNameLen
// bytes of ASCII letters, digits and . - _ : @, so that it reads the same
// in logs, metric labels and wf nodes, with nothing to quote or escape.
func CheckNodeName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > MaxNodeNameLen:
		return fmt.Errorf("is %d bytes, at most %d", len(name), MaxNodeNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nodeNameByte(name[i]) {
			return fmt.Errorf("%q has %q at byte %d: use ASCII letters, digits and . - _ : @", name, name[i], i)
		}
	}
	return nil
}

func nodeNameByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte(".-_:@", b) >= 0
}

// DefaultNodeName is the node name of a daemon not given one:
// "HOSTNAME-PID". The host tells machines apart and the process id tells
// apart the daemons of one machine (of one container, whose host name is
// its own), so no two live daemons share it; a restarted daemon gets a new
// one, so it never waits for its own predecessor's name to go stale. Bytes
// a node name may not hold become '-'.
func DefaultNodeName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "durabled"
	}
	b := []byte(host)
	for i := range b {
		if !nodeNameByte(b[i]) {
			b[i] = '-'
		}
	}
	suffix := fmt.Sprintf("-%d", os.Getpid())
	if len(b) > MaxNodeNameLen-len(suffix) {
		b = b[:MaxNodeNameLen-len(suffix)]
	}
	return string(b) + suffix
}

// self is this daemon as ListNodes and the metrics report it.
func (s *Server) self() engine.NodeSelf {
	return engine.NodeSelf{Name: s.opts.Node, Started: s.opts.NodeStarted, AliveWithin: s.opts.NodeAliveWithin}
}

// ListNodes returns the nodes that serve the store, and which one answered.
func (s *Server) ListNodes(ctx context.Context, req *durablev1.ListNodesRequest) (*durablev1.ListNodesResponse, error) {
	if err := s.check().listNodes(req); err != nil {
		return nil, s.toStatus(ctx, "ListNodes", err)
	}
	resp, err := s.engine.ListNodes(ctx, s.self())
	return reply(s, ctx, "ListNodes", resp, err)
}

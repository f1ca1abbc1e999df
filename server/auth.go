package server

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Auth authenticates calls against an auth file and keeps the file's
// identities current: Reload swaps in a new version at once for every call
// that starts after it, or keeps the old one when the new one does not parse.
type Auth struct {
	path string
	ids  atomic.Pointer[Identities]
}

// NewAuth loads the auth file at path.
func NewAuth(path string) (*Auth, error) {
	ids, err := LoadAuthFile(path)
	if err != nil {
		return nil, err
	}
	a := &Auth{path: path}
	a.ids.Store(ids)
	return a, nil
}

// NewAuthFrom returns an Auth over identities already parsed; Reload then
// has no file to read. Tests and embedders use it.
func NewAuthFrom(ids *Identities) *Auth {
	a := &Auth{}
	a.ids.Store(ids)
	return a
}

// Reload reads the auth file again. On error the identities in force stay.
func (a *Auth) Reload() (*Identities, error) {
	if a.path == "" {
		return a.ids.Load(), nil
	}
	ids, err := LoadAuthFile(a.path)
	if err != nil {
		return nil, err
	}
	a.ids.Store(ids)
	return ids, nil
}

// Identities returns the identities in force.
func (a *Auth) Identities() *Identities { return a.ids.Load() }

// authenticate finds who a call runs as: the bearer token of its
// "authorization" metadata when there is one, else the common name of the
// client certificate the TLS handshake verified. The token is looked up by
// its SHA-256, so neither the file nor memory holds a token itself.
func (a *Auth) authenticate(ctx context.Context) (*Principal, error) {
	ids := a.ids.Load()
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get("authorization"); len(vals) > 0 {
		scheme, token, ok := strings.Cut(vals[0], " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
			return nil, status.Error(codes.Unauthenticated, `malformed authorization metadata: want "Bearer TOKEN"`)
		}
		if p := ids.byToken[sha256.Sum256([]byte(token))]; p != nil {
			return p, nil
		}
		return nil, status.Error(codes.Unauthenticated, "the bearer token is not one of the auth file's (check --token or DURABLE_TOKEN)")
	}
	if cn, ok := verifiedCommonName(ctx); ok {
		if p := ids.byCN[cn]; p != nil {
			return p, nil
		}
		return nil, status.Errorf(codes.Unauthenticated, "the client certificate's common name %q is not a principal of the auth file", cn)
	}
	return nil, status.Error(codes.Unauthenticated,
		"no credentials: send a bearer token (--token or DURABLE_TOKEN) or a client certificate (--tls-cert and --tls-key)")
}

// verifiedCommonName is the subject common name of the client certificate
// the TLS handshake verified against --tls-client-ca, if there is one.
func verifiedCommonName(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", false
	}
	return info.State.VerifiedChains[0][0].Subject.CommonName, true
}

// access is who may make a call.
type access int

const (
	// accessWorker: workers only (the task protocol and starting workflows).
	accessWorker access = iota + 1
	// accessRead: readers and operators.
	accessRead
	// accessOperate: operators only.
	accessOperate
	// accessAnyone: any authenticated principal (reflection).
	accessAnyone
	// accessOpen: no credentials needed (health, for load balancers).
	accessOpen
)

// methodAccess is the roles table: who may call each RPC. An RPC missing
// from it is refused to everyone when auth is on.
var methodAccess = map[string]access{
	durablev1.Durable_PollWorkflowTask_FullMethodName:       accessWorker,
	durablev1.Durable_CompleteWorkflowTask_FullMethodName:   accessWorker,
	durablev1.Durable_FailWorkflowTask_FullMethodName:       accessWorker,
	durablev1.Durable_GetWorkflowTaskHistory_FullMethodName: accessWorker,
	durablev1.Durable_PollActivityTask_FullMethodName:       accessWorker,
	durablev1.Durable_CompleteActivityTask_FullMethodName:   accessWorker,
	durablev1.Durable_FailActivityTask_FullMethodName:       accessWorker,
	durablev1.Durable_RecordHeartbeat_FullMethodName:        accessWorker,
	durablev1.Durable_StartWorkflow_FullMethodName:          accessWorker,

	durablev1.Durable_DescribeWorkflow_FullMethodName:    accessRead,
	durablev1.Durable_GetWorkflowHistory_FullMethodName:  accessRead,
	durablev1.Durable_ListWorkflows_FullMethodName:       accessRead,
	durablev1.Durable_ListDeadLetters_FullMethodName:     accessRead,
	durablev1.Durable_ListActivityStats_FullMethodName:   accessRead,
	durablev1.Durable_Watch_FullMethodName:               accessRead,
	durablev1.Durable_ListAuditRecords_FullMethodName:    accessRead,
	durablev1.Durable_DescribeOperation_FullMethodName:   accessRead,
	durablev1.Durable_ListOperations_FullMethodName:      accessRead,
	durablev1.Durable_ListPolicyOverrides_FullMethodName: accessRead,
	durablev1.Durable_ListActivities_FullMethodName:      accessRead,
	durablev1.Durable_ListTaskQueues_FullMethodName:      accessRead,
	durablev1.Durable_ListNodes_FullMethodName:           accessRead,

	durablev1.Durable_RedriveDeadLetter_FullMethodName:   accessOperate,
	durablev1.Durable_RedriveDeadLetters_FullMethodName:  accessOperate,
	durablev1.Durable_CancelOperation_FullMethodName:     accessOperate,
	durablev1.Durable_SetPolicyOverride_FullMethodName:   accessOperate,
	durablev1.Durable_ClearPolicyOverride_FullMethodName: accessOperate,
}

// accessOf is who may call method, services outside Durable included.
func accessOf(method string) (access, bool) {
	switch {
	case strings.HasPrefix(method, "/grpc.health.v1.Health/"):
		return accessOpen, true
	case strings.HasPrefix(method, "/grpc.reflection."):
		return accessAnyone, true
	}
	a, ok := methodAccess[method]
	return a, ok
}

// allows reports whether role may make a call of access a.
func (a access) allows(r Role) bool {
	switch a {
	case accessWorker:
		return r == RoleWorker
	case accessRead:
		return r == RoleReader || r == RoleOperator
	case accessOperate:
		return r == RoleOperator
	case accessAnyone, accessOpen:
		return true
	}
	return false
}

// shortMethod is "RedriveDeadLetter" for "/durable.v1.Durable/RedriveDeadLetter".
func shortMethod(full string) string {
	return full[strings.LastIndex(full, "/")+1:]
}

// authorize decides a call: without auth every call runs as LocalPrincipal;
// with it the call must authenticate (unless the method is open) and its
// principal's role must allow the method. It returns ctx carrying the
// principal.
func (s *Server) authorize(ctx context.Context, method string) (context.Context, error) {
	if s.opts.Auth == nil {
		return withPrincipal(ctx, LocalPrincipal), nil
	}
	acc, known := accessOf(method)
	if known && acc == accessOpen {
		return ctx, nil
	}
	p, err := s.opts.Auth.authenticate(ctx)
	if err != nil {
		s.denied(ctx, method, "", err)
		return nil, err
	}
	if !known || !acc.allows(p.Role) {
		err := status.Errorf(codes.PermissionDenied, "principal %q (role %s) may not call %s", p.Name, p.Role, shortMethod(method))
		s.denied(ctx, method, p.Name, err)
		return nil, err
	}
	return withPrincipal(ctx, p), nil
}

// denied logs a refused call, at most once a second with a count of the
// others, so that a misconfigured fleet cannot flood the log.
func (s *Server) denied(ctx context.Context, method, principal string, err error) {
	if n, ok := s.deniedLog.allow(); ok {
		addr := ""
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			addr = p.Addr.String()
		}
		s.opts.Logger.WarnContext(ctx, "call refused", "method", shortMethod(method), "principal", principal,
			"peer", addr, "code", status.Code(err).String(), "err", status.Convert(err).Message(), "also_refused_since_last", n)
	}
}

// principal is who the call in ctx runs as. Outside the interceptor (a
// Server attached with Register to a grpc.Server built elsewhere) there is
// none: without auth that is LocalPrincipal, with auth the call is refused.
func (s *Server) principal(ctx context.Context) (*Principal, error) {
	if p, ok := PrincipalFrom(ctx); ok {
		return p, nil
	}
	if s.opts.Auth == nil {
		return LocalPrincipal, nil
	}
	return nil, status.Error(codes.Unauthenticated, "the call was not authenticated: serve with Server.NewGRPCServer")
}

// checkQueue refuses a worker limited to other task queues.
func (s *Server) checkQueue(ctx context.Context, method, queue string) error {
	p, err := s.principal(ctx)
	if err != nil {
		return err
	}
	if p.mayUseQueue(queue) {
		return nil
	}
	err = status.Errorf(codes.PermissionDenied, "principal %q (role %s) may not call %s on task queue %q: it is limited to %s",
		p.Name, p.Role, method, queue, p.queueList())
	s.denied(ctx, "/"+method, p.Name, err)
	return err
}

// unaryInterceptor authorizes a unary call before its handler runs.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamInterceptor authorizes a streaming call before its handler runs.
func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &principalStream{ServerStream: ss, ctx: ctx})
}

// principalStream is a ServerStream whose context carries the principal.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (p *principalStream) Context() context.Context { return p.ctx }

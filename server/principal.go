package server

import (
	"context"
	"slices"
	"strings"

	"github.com/tinyllm/durable/engine"
)

// Role is what a principal may do. Every principal has exactly one.
type Role string

const (
	// RoleWorker polls, heartbeats, completes and fails tasks on its task
	// queues, and starts workflows on them.
	RoleWorker Role = "worker"
	// RoleReader reads: workflows, histories, dead letters, activity stats,
	// the audit log and the Watch stream.
	RoleReader Role = "reader"
	// RoleOperator may do everything a reader may, plus redrives and every
	// other operator action; each of those lands in the audit log.
	RoleOperator Role = "operator"
)

// roles lists the roles in the order help texts name them.
var roles = []Role{RoleWorker, RoleReader, RoleOperator}

// LocalPrincipal is who every call runs as when durabled runs without an
// auth file (and so only on loopback): an operator named "local".
var LocalPrincipal = &Principal{Name: "local", Role: RoleOperator}

// Principal is an identity of the auth file: who a call runs as. It comes
// from the call's credentials, never from a field of the request.
type Principal struct {
	Name string
	Role Role
	// TaskQueues limits a worker to these task queues; empty means any.
	TaskQueues []string
}

// mayUseQueue reports whether p may poll, or start workflows on, queue.
func (p *Principal) mayUseQueue(queue string) bool {
	return len(p.TaskQueues) == 0 || slices.Contains(p.TaskQueues, queue)
}

func (p *Principal) actor() engine.Actor {
	return engine.Actor{Principal: p.Name, Role: string(p.Role)}
}

// queueList is p's task queues for messages.
func (p *Principal) queueList() string { return strings.Join(p.TaskQueues, ", ") }

type principalKey struct{}

// withPrincipal returns ctx carrying p, for the handlers after the
// interceptor.
func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal a call runs as, as the server's
// interceptor authenticated it; false outside such a call.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

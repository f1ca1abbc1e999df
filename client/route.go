package client

import (
	"context"
	"hash/fnv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
)

// A client of several nodes sends every call that names a workflow through
// one node, the one the workflow id picks among the nodes that are up, and
// the calls that name none round robin. Nodes that share a database may
// each answer any call, but a workflow's record is written by every call
// about it (each report of its tasks), and two nodes writing one record at
// once wait on its row lock, and one of them runs its whole batch again:
// with the reports of each workflow kept on one node, three nodes on one
// machine ran the throughput benchmark about 1.4 times as fast
// (docs/scale.md, "Routing each workflow to one node").
//
// The node is chosen by rendezvous hashing: each node that is up scores
// hash(workflow id, node address), and the highest wins. A node that goes
// away moves only its own workflows, to the next highest; when it comes
// back they return to it. Routing is a preference, not a rule: any node
// answers any call, so a call routed while the client's view of the nodes
// changes is still answered correctly.

// routeBalancer is the name of the balancer of a connection to a list of
// addresses.
const routeBalancer = "durable_workflow_affinity"

// routeConfig is the service config of such a connection.
const routeConfig = `{"loadBalancingConfig": [{"` + routeBalancer + `": {}}]}`

func init() {
	balancer.Register(base.NewBalancerBuilder(routeBalancer, routePickerBuilder{}, base.Config{}))
}

// workflowKey is the context key of the workflow a call is about.
type workflowKey struct{}

// ForWorkflow returns a context whose calls, made through a Client of
// several addresses, go to the node that workflowID picks: the one every
// other call about that workflow goes to, while it is up. A call whose
// request names a workflow (StartWorkflow, DescribeWorkflow, …) is routed by
// it without this; a report of a task, which names its workflow only inside
// the task token, needs it, and the SDK's worker sets it for each report. A
// Client of one address ignores it.
func ForWorkflow(ctx context.Context, workflowID string) context.Context {
	if workflowID == "" {
		return ctx
	}
	return context.WithValue(ctx, workflowKey{}, workflowID)
}

// workflowOf returns the workflow ctx routes by, if any.
func workflowOf(ctx context.Context) string {
	id, _ := ctx.Value(workflowKey{}).(string)
	return id
}

// routeByRequest is the unary interceptor of a connection to a list: a
// request that names a workflow routes its call by it, unless the context
// already names one.
func routeByRequest(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if workflowOf(ctx) == "" {
		if r, ok := req.(interface{ GetWorkflowId() string }); ok {
			ctx = ForWorkflow(ctx, r.GetWorkflowId())
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

type routePickerBuilder struct{}

func (routePickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &routePicker{}
	for sc, sci := range info.ReadySCs {
		p.nodes = append(p.nodes, routeNode{sc: sc, addr: sci.Address.Addr})
	}
	return p
}

// routePicker picks among the nodes that are up.
type routePicker struct {
	nodes []routeNode
	next  atomic.Uint32 // round robin for calls about no workflow
}

type routeNode struct {
	sc   balancer.SubConn
	addr string
}

func (p *routePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if id := workflowOf(info.Ctx); id != "" {
		return balancer.PickResult{SubConn: p.nodes[rendezvous(id, p.nodes)].sc}, nil
	}
	i := p.next.Add(1) % uint32(len(p.nodes))
	return balancer.PickResult{SubConn: p.nodes[i].sc}, nil
}

// rendezvous returns the index of the node that scores highest for
// workflowID; ties (which need a hash collision) go to the lower address.
func rendezvous(workflowID string, nodes []routeNode) int {
	best, bestScore := -1, uint64(0)
	for i, n := range nodes {
		h := fnv.New64a()
		h.Write([]byte(workflowID))
		h.Write([]byte{0})
		h.Write([]byte(n.addr))
		s := h.Sum64()
		if best < 0 || s > bestScore || s == bestScore && n.addr < nodes[best].addr {
			best, bestScore = i, s
		}
	}
	return best
}

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// NodeSelf is the daemon an engine runs in, as ListNodes reports it.
type NodeSelf struct {
	// Name is the node's name. On a shared store the store's Node() is the
	// one reported (the daemon gives the store the same name).
	Name string
	// Started is when the daemon started: the start of the one node of a
	// store that is not shared.
	Started time.Time
	// AliveWithin is a shared store's liveness rule: a node last heard from
	// longer ago than this is not alive.
	AliveWithin time.Duration
}

// NodeAlive is the liveness rule: a node last seen at lastSeen is alive at
// now while at most within has passed. A last-seen time ahead of now (the
// clock of the node that wrote it runs ahead) counts as alive.
func NodeAlive(lastSeen, now time.Time, within time.Duration) bool {
	return now.Sub(lastSeen) <= within
}

// ListNodes returns the nodes that serve the engine's store, by name, as of
// the engine's clock: on a shared store every node the store knows
// (SharedStore.Nodes), alive or not by self.AliveWithin; on any other store
// self alone, alive, last seen now.
func (e *Engine) ListNodes(ctx context.Context, self NodeSelf) (*durablev1.ListNodesResponse, error) {
	resp := &durablev1.ListNodesResponse{AnsweredBy: self.Name, AliveWithin: durationpb.New(self.AliveWithin)}
	shared, ok := e.store.(SharedStore)
	if !ok {
		now := e.now()
		resp.ServerTime = ts(now)
		resp.Nodes = []*durablev1.Node{{Name: self.Name, StartTime: ts(self.Started), LastSeenTime: ts(now), Alive: true}}
		return resp, nil
	}
	infos, err := sharedNodes(ctx, shared)
	if err != nil {
		return nil, err
	}
	now := e.now() // after the read: a heartbeat it saw is not in the future
	resp.AnsweredBy, resp.ServerTime = shared.Node(), ts(now)
	resp.Nodes = nodesAsOf(infos, now, self.AliveWithin)
	return resp, nil
}

// nodesAsOf is the rule of ListNodes on a shared store: the nodes by name,
// each alive or not as of now.
func nodesAsOf(infos []NodeInfo, now time.Time, within time.Duration) []*durablev1.Node {
	out := make([]*durablev1.Node, 0, len(infos))
	for _, n := range infos {
		out = append(out, &durablev1.Node{Name: n.Name, StartTime: ts(n.Started), LastSeenTime: ts(n.LastSeen),
			Alive: NodeAlive(n.LastSeen, now, within)})
	}
	slices.SortFunc(out, func(a, b *durablev1.Node) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// sharedNodes reads the store's nodes, giving up when ctx ends: Nodes takes
// no context, and a call must not outlive its deadline on a database that
// does not answer.
func sharedNodes(ctx context.Context, s SharedStore) ([]NodeInfo, error) {
	type result struct {
		infos []NodeInfo
		err   error
	}
	done := make(chan result, 1)
	go func() {
		infos, err := s.Nodes()
		done <- result{infos, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("list nodes: %w", r.err)
		}
		return r.infos, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const nodesUsage = `
Usage: wf nodes [--min-alive N]

Lists the durabled nodes that serve the daemon's store. On PostgreSQL that
is every node that has served the database in the last day: its name
(durabled --node), whether it is ALIVE, when it was LAST SEEN and when it
STARTED. A node says it is alive about once a second and counts as alive
while it was heard from within the store's window (5s); one that is not
alive stopped, crashed or lost the database: its leases expire and its
timers are fired by the other nodes. Liveness is judged on the clock of
the node that answers, named below the table (with an address list, any
of them), against heartbeats stamped with the database's clock: keep the
clocks in sync (NTP). On Badger the list is the one daemon.

--min-alive N exits 1 when fewer than N nodes are alive, for a health
probe or a cron.

Examples:
  wf nodes
  wf --addr node1:7345,node2:7345,node3:7345 nodes --min-alive 3 || page-oncall "a durabled node is down"
  wf nodes --json | jq -r '.nodes[] | select(.alive | not) | .name'
`

// nodesDoc is nodes's --json document.
type nodesDoc struct {
	// ServerTime is the answering node's clock (RFC 3339): alive is judged
	// as of then.
	ServerTime string `json:"serverTime"`
	AnsweredBy string `json:"answeredBy"`
	// AliveWithin is the liveness window as protojson writes a duration
	// ("5s").
	AliveWithin string            `json:"aliveWithin"`
	Nodes       []json.RawMessage `json:"nodes"`
}

func (c *cli) nodes(args []string) int {
	fs := c.flagSet("nodes", nodesUsage)
	minAlive := fs.Int("min-alive", 0, "exit 1 when fewer than `N` nodes are alive")
	pos, code := c.parse(fs, "nodes", args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return c.usageError("nodes", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if *minAlive < 0 {
		return c.usageError("nodes", fmt.Sprintf("--min-alive must be 0 or more, got %d", *minAlive))
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	r, err := cl.Nodes(ctx)
	if err != nil {
		return c.fail(err)
	}
	alive := 0
	for _, n := range r.GetNodes() {
		if n.GetAlive() {
			alive++
		}
	}
	result := exitOK
	if alive < *minAlive {
		result = exitFailed
	}
	if c.g.json {
		doc := nodesDoc{ServerTime: r.GetServerTime().AsTime().UTC().Format(time.RFC3339Nano), AnsweredBy: r.GetAnsweredBy(),
			AliveWithin: protoDuration(r.GetAliveWithin().AsDuration()), Nodes: make([]json.RawMessage, 0, len(r.GetNodes()))}
		for _, n := range r.GetNodes() {
			doc.Nodes = append(doc.Nodes, rawProto(n))
		}
		if code := c.done(printJSON(c.stdout, doc)); code != exitOK {
			return code
		}
		return result
	}
	printNodes(c.stdout, r, alive)
	if result != exitOK {
		fmt.Fprintf(c.stderr, "wf nodes: %d %s alive, fewer than --min-alive %d\n", alive, plural(alive, "node", "nodes"), *minAlive)
	}
	return result
}

// printNodes writes the nodes table and a line naming who answered.
func printNodes(w io.Writer, r *durablev1.ListNodesResponse, alive int) {
	now := r.GetServerTime().AsTime()
	if len(r.GetNodes()) == 0 {
		fmt.Fprintf(w, "No nodes listed. Answered by %s.\n", dash(activity.EscapeID(r.GetAnsweredBy())))
		return
	}
	t := table(w)
	row(t, "NODE", "ALIVE", "LAST SEEN", "STARTED")
	for _, n := range r.GetNodes() {
		state := "no"
		if n.GetAlive() {
			state = "yes"
		}
		row(t, activity.EscapeID(n.GetName()), state, stampAgo(n.GetLastSeenTime(), now), stampAgo(n.GetStartTime(), now))
	}
	t.Flush()
	fmt.Fprintf(w, "%d %s, %d alive (heard from within %s). Answered by %s.\n", len(r.GetNodes()),
		plural(len(r.GetNodes()), "node", "nodes"), alive, human(r.GetAliveWithin().AsDuration()), activity.EscapeID(r.GetAnsweredBy()))
}

// protoDuration writes d as protojson writes a Duration: seconds with an
// "s" ("5s", "0.5s").
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
)

// deadLettersDoc is the --json document of dlq list.
type deadLettersDoc struct {
	DeadLetters []json.RawMessage `json:"deadLetters"`
}

// groupsDoc is the --json document of dlq list --group.
type groupsDoc struct {
	Groups []groupDoc `json:"groups"`
	// DeadLetters is how many letters the groups hold together.
	DeadLetters int `json:"deadLetters"`
}

type groupDoc struct {
	Fingerprint string `json:"fingerprint"`
	Count       int    `json:"count"`
	FailureType string `json:"failureType"`
	// Message is the normalised message: details replaced by placeholders.
	Message           string `json:"message"`
	FirstDeadLettered string `json:"firstDeadLettered"`
	LastDeadLettered  string `json:"lastDeadLettered"`
	ExampleWorkflowID string `json:"exampleWorkflowId"`
	ExampleActivityID string `json:"exampleActivityId"`
}

// printGroups writes dlq list --group: one line per failure fingerprint.
func (c *cli) printGroups(groups []client.FailureGroup, letters int) int {
	if c.g.json {
		doc := groupsDoc{Groups: make([]groupDoc, 0, len(groups)), DeadLetters: letters}
		for _, g := range groups {
			doc.Groups = append(doc.Groups, groupDoc{
				Fingerprint: g.Fingerprint, Count: g.Count, FailureType: g.FailureType, Message: g.Message,
				FirstDeadLettered: g.First.UTC().Format(time.RFC3339Nano), LastDeadLettered: g.Last.UTC().Format(time.RFC3339Nano),
				ExampleWorkflowID: g.Example.GetWorkflowId(), ExampleActivityID: g.Example.GetActivityId(),
			})
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(groups) == 0 {
		fmt.Fprintln(c.stdout, "No dead letters.")
		return exitOK
	}
	now := time.Now()
	t := table(c.stdout)
	row(t, "FINGERPRINT", "COUNT", "TYPE", "MESSAGE", "FIRST", "LAST", "EXAMPLE")
	for _, g := range groups {
		row(t, g.Fingerprint, strconv.Itoa(g.Count), dash(g.FailureType), dash(cut(g.Message, 80)),
			relative(g.First, now), relative(g.Last, now), activity.EscapeID(g.Example.GetWorkflowId())+"/"+activity.EscapeID(g.Example.GetActivityId()))
	}
	t.Flush()
	fmt.Fprintf(c.stdout, "%d dead %s in %d %s; 'wf dlq list --fingerprint F' lists one\n",
		letters, plural(letters, "letter", "letters"), len(groups), plural(len(groups), "group", "groups"))
	return exitOK
}

package engine

import (
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// DecodeToken parses a task token. A token that does not parse or lacks a
// workflow id is an *InvalidError naming task_token.
func DecodeToken(b []byte) (*durablev1.TaskToken, error) {
	if len(b) == 0 {
		return nil, invalid("task_token", "is required")
	}
	var t durablev1.TaskToken
	if err := proto.Unmarshal(b, &t); err != nil {
		return nil, invalid("task_token", "is malformed: %v", err)
	}
	if t.GetWorkflowId() == "" || t.GetLeaseId() <= 0 {
		return nil, invalid("task_token", "is malformed: no workflow id or lease")
	}
	return &t, nil
}

func encodeToken(t *durablev1.TaskToken) []byte {
	b, err := proto.Marshal(t)
	if err != nil {
		panic(err) // a TaskToken always marshals
	}
	return b
}

package engine

import (
	"crypto/rand"
	"encoding/binary"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// A task token names one lease: the workflow, the activity (none for a
// workflow task), the attempt and the lease id. The engine encodes and
// decodes its body; the server seals the body with the daemon's MAC before a
// worker sees it and checks the seal before the engine does, so the engine
// only ever decodes tokens it issued itself.

// DecodeToken parses a task token body. A body that does not parse or lacks a
// workflow id or lease is an *InvalidError naming task_token.
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

// newLeaseID returns a random positive lease id. Lease ids come from the
// operating system's CSPRNG, not from a counter, so that a token of one lease
// says nothing about the id of the next (the MAC is the real guard; this is
// depth behind it).
func newLeaseID() int64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand.Read never fails on supported platforms
		}
		if id := int64(binary.BigEndian.Uint64(b[:]) >> 1); id > 0 {
			return id
		}
	}
}

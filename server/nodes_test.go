package server

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestListNodesOnBadgerIsTheOneDaemonAlive(t *testing.T) {
	t.Parallel()
	c := setup(t)
	before := time.Now()
	r, err := c.ListNodes(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetNodes()) != 1 {
		t.Fatalf("ListNodes = %v, want one node", r)
	}
	n := r.GetNodes()[0]
	if n.GetName() != DefaultNodeName() || r.GetAnsweredBy() != n.GetName() || !n.GetAlive() {
		t.Errorf("ListNodes = %v, want %q answering, alive", r, DefaultNodeName())
	}
	if n.GetStartTime().AsTime().After(before) || n.GetLastSeenTime().AsTime().Before(before) {
		t.Errorf("node %v: want it started before the call and seen at it", n)
	}
	if r.GetAliveWithin().AsDuration() != DefaultNodeAliveWithin {
		t.Errorf("alive_within = %v, want the default rule %v", r.GetAliveWithin().AsDuration(), DefaultNodeAliveWithin)
	}
}

func TestCheckNodeName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, node, wantErr string
	}{
		{"HostPid", "db-host.example-4242", ""},
		{"PodName", "durabled-0", ""},
		{"HostPort", "node1:7345", ""},
		{"Empty", "", "empty"},
		{"Space", "node 1", `' ' at byte 4`},
		{"Newline", "node\n1", `'\n' at byte 4`},
		{"NotASCII", "nœud", "at byte 1"},
		{"TooLong", strings.Repeat("n", MaxNodeNameLen+1), "at most 128"},
		{"Longest", strings.Repeat("n", MaxNodeNameLen), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckNodeName(tt.node)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckNodeName(%q) = %v, want nil", tt.node, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckNodeName(%q) = %v, want an error with %q", tt.node, err, tt.wantErr)
			}
		})
	}
}

func TestDefaultNodeNameIsAValidName(t *testing.T) {
	t.Parallel()
	if err := CheckNodeName(DefaultNodeName()); err != nil {
		t.Fatalf("DefaultNodeName() = %q: %v", DefaultNodeName(), err)
	}
}

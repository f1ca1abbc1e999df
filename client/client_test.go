package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestDialFailsFastWhenUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = client.Dial(ctx, addr)
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Dial(%s) = %v, want ErrUnreachable", addr, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Dial took %v, want a fast failure", d)
	}
}

func TestJSONConverter(t *testing.T) {
	t.Parallel()
	type pair struct {
		A string
		B int
	}
	tests := []struct {
		name string
		in   any
		out  any
		want any
	}{
		{"Struct", pair{"x", 2}, &pair{}, &pair{"x", 2}},
		{"Int", 42, new(int), func() *int { v := 42; return &v }()},
		{"Nil", nil, new(string), new(string)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := client.JSON.ToPayload(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := client.JSON.FromPayload(b, tt.out); err != nil {
				t.Fatal(err)
			}
			gb, _ := client.JSON.ToPayload(tt.out)
			wb, _ := client.JSON.ToPayload(tt.want)
			if string(gb) != string(wb) {
				t.Fatalf("round trip = %s, want %s", gb, wb)
			}
		})
	}
}

func TestWorkflowFailedErrorUnwrapsToActivityError(t *testing.T) {
	t.Parallel()
	var err error = &client.WorkflowFailedError{
		WorkflowID: "w1",
		Failure:    &durablev1.Failure{Type: "BadInput", Message: "no", NonRetryable: true},
	}
	var ae *activity.Error
	if !errors.As(err, &ae) || ae.Type != "BadInput" || !ae.NoRetry {
		t.Fatalf("errors.As(%v) = %+v, want BadInput non-retryable", err, ae)
	}
	if !client.IsWorkflowFailed(err) {
		t.Fatal("IsWorkflowFailed = false")
	}
}

func TestOverrideFor(t *testing.T) {
	t.Parallel()
	all := &durablev1.PolicyOverride{ActivityType: "Charge", Reason: "all"}
	eu := &durablev1.PolicyOverride{ActivityType: "Charge", TaskQueue: "eu", Reason: "eu"}
	gone := &durablev1.PolicyOverride{ActivityType: "Charge", TaskQueue: "us", Reason: "gone", Cleared: true}
	other := &durablev1.PolicyOverride{ActivityType: "Ship", TaskQueue: "eu", Reason: "ship"}
	list := []*durablev1.PolicyOverride{eu, other, all, gone}
	tests := []struct {
		typ, queue, want string
	}{
		{"Charge", "eu", "eu"},
		{"Charge", "us", "all"},
		{"Charge", "", "all"},
		{"Ship", "us", ""},
		{"Ship", "eu", "ship"},
		{"Nope", "eu", ""},
	}
	for _, tt := range tests {
		if got := client.OverrideFor(list, tt.typ, tt.queue).GetReason(); got != tt.want {
			t.Errorf("OverrideFor(%s, %q) = %q, want %q", tt.typ, tt.queue, got, tt.want)
		}
	}
}

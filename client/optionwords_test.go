package client

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestParseOptionWordsSetsExactlyTheFieldsNamed(t *testing.T) {
	got, err := ParseOptionWords("max-attempts=8 --initial=30s start-to-close=2m non-retryable=Fatal,Bad")
	if err != nil {
		t.Fatal(err)
	}
	want := &durablev1.OptionsPatch{
		MaxAttempts: proto.Int32(8), InitialMs: proto.Int64(30000),
		StartToCloseTimeout: durationpb.New(2 * time.Minute),
		NonRetryable:        &durablev1.StringList{Values: []string{"Fatal", "Bad"}},
	}
	if !proto.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseOptionWordsEmptyNonRetryableClearsTheList(t *testing.T) {
	got, err := ParseOptionWords("non-retryable=")
	if err != nil || got.NonRetryable == nil || len(got.GetNonRetryable().GetValues()) != 0 {
		t.Fatalf("got %v, %v; want a set, empty list", got, err)
	}
}

func TestParseOptionWordsNamesTheBadWord(t *testing.T) {
	for _, line := range []string{"max-attempts=8 retries=3", "max-attempts=x", "initial=soon", "backoff=NaN", "initial=-1s", "max-attempts", ""} {
		_, err := ParseOptionWords(line)
		if err == nil {
			t.Errorf("%q: no error", line)
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && !strings.Contains(err.Error(), f[len(f)-1]) {
			t.Errorf("%q: error %q does not name the word", line, err)
		}
	}
}

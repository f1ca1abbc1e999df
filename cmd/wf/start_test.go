package main

import (
	"encoding/json"
	"flag"
	"strings"
	"testing"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestInputFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		input string
		want  string // the payload; "" for none
		known []string
	}{
		{"Seed", []string{"FlakyDemo", "--fail-rate", "0.5", "--activities", "3"}, "", `{"activities":3,"fail_rate":0.5}`, []string{"FlakyDemo"}},
		{"NoInput", []string{"FlakyDemo"}, "", "", []string{"FlakyDemo"}},
		{"BareFlagIsTrue", []string{"X", "--dry-run"}, "", `{"dry_run":true}`, []string{"X"}},
		{"BareFlagBeforeFlag", []string{"X", "--dry-run", "--n", "2"}, "", `{"dry_run":true,"n":2}`, []string{"X"}},
		{"EqualsForm", []string{"X", "--name=ada", "--ok=false"}, "", `{"name":"ada","ok":false}`, []string{"X"}},
		{"SingleDash", []string{"X", "-limit", "10"}, "", `{"limit":10}`, []string{"X"}},
		{"NegativeNumber", []string{"X", "--delta", "-1.5"}, "", `{"delta":-1.5}`, []string{"X"}},
		{"StringsStayStrings", []string{"X", "--region", "eu-west-1", "--zip", "007", "--v", "1.2.3"}, "", `{"region":"eu-west-1","v":"1.2.3","zip":"007"}`, []string{"X"}},
		{"BigIntegerExact", []string{"X", "--order", "12345678901234567890"}, "", `{"order":12345678901234567890}`, []string{"X"}},
		{"ObjectAndArray", []string{"X", "--tags", `["a","b"]`, "--meta", `{"k":1}`}, "", `{"meta":{"k":1},"tags":["a","b"]}`, []string{"X"}},
		{"NotQuiteJSON", []string{"X", "--tags", "[a"}, "", `{"tags":"[a"}`, []string{"X"}},
		{"EmptyValue", []string{"X", "--note", ""}, "", `{"note":""}`, []string{"X"}},
		{"KnownFlagsPassThrough", []string{"X", "--wait", "--id", "w-1", "--fail-rate", "1", "--json"}, "", `{"fail_rate":1}`, []string{"X", "--wait", "--id", "w-1", "--json"}},
		{"KnownValueLooksLikeFlag", []string{"--id", "--odd", "X"}, "", "", []string{"--id", "--odd", "X"}},
		{"InputMerged", []string{"X", "--b", "2"}, `{"a": 1, "b": 1}`, `{"a":1,"b":2}`, []string{"X"}},
		{"InputAlone", []string{"X"}, ` [1, 2] `, `[1,2]`, []string{"X"}},
		{"AfterDoubleDash", []string{"X", "--", "--not-a-field"}, "", "", []string{"X", "--", "--not-a-field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("start", flag.ContinueOnError)
			fs.String("id", "", "")
			fs.Bool("wait", false, "")
			fs.Bool("json", false, "")
			known, fields, err := splitInputFlags(tt.args, fs.Lookup)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(known, " ") != strings.Join(tt.known, " ") {
				t.Errorf("known = %q, want %q", known, tt.known)
			}
			got, err := buildInput(tt.input, fields)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("input = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBuildInput_Errors(t *testing.T) {
	t.Parallel()
	if _, err := buildInput("{", nil); err == nil {
		t.Error("invalid --input accepted")
	}
	if _, err := buildInput("[1]", []inputField{{name: "a", value: true}}); err == nil {
		t.Error("array --input merged with fields")
	}
}

func TestStartWait(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	tests := []struct {
		name    string
		command *durablev1.Command
		code    int
		stdout  string
		stderr  string
	}{
		{"Completed", &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: []byte(`{"charged":42}`)},
			exitOK, `"charged": 42`, ""},
		{"Failed", &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW, Failure: &durablev1.Failure{Type: "OutOfStock", Message: "no widgets"}},
			exitFailed, "", "OutOfStock: no widgets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			queue := "wait-" + tt.name
			d := newDriver(t, c, queue)
			done := make(chan result, 1)
			go func() {
				var out, errOut strings.Builder
				code := run([]string{"--addr", addr, "start", "Order", "--task-queue", queue, "--wait", "--timeout", "20s", "--qty", "2"}, &out, &errOut)
				done <- result{out.String(), errOut.String(), code}
			}()
			d.decide(tt.command)
			r := (<-done).wantCode(t, tt.code)
			mustContain(t, r.stdout, tt.stdout)
			mustContain(t, r.stderr, tt.stderr)
		})
	}
}

func TestStartWait_JSON(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "wait-json")
	done := make(chan result, 1)
	go func() {
		var out, errOut strings.Builder
		code := run([]string{"--addr", addr, "--json", "start", "Order", "--id", "wj", "--task-queue", "wait-json", "--wait"}, &out, &errOut)
		done <- result{out.String(), errOut.String(), code}
	}()
	d.decide(&durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: []byte(`[1,2]`)})
	r := (<-done).wantCode(t, exitOK)
	var doc startDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("parse: %v\n%s", err, r.stdout)
	}
	var res []int
	if err := json.Unmarshal(doc.Result, &res); err != nil || len(res) != 2 || doc.WorkflowID != "wj" || doc.Status != "completed" {
		t.Errorf("doc = %+v (result %s)", doc, doc.Result)
	}
}

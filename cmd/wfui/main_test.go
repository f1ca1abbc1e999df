package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want int
		// oneLine: the refusal is one line on stderr that names the problem.
		oneLine string
	}{
		{name: "Help", args: []string{"--help"}, want: 0},
		{name: "UnknownFlag", args: []string{"--nope"}, want: 2},
		{name: "StrayArgument", args: []string{"extra"}, want: 2},
		{name: "TokenFileMissing", args: []string{"--token-file", missing}, want: 2, oneLine: "token file"},
		{name: "TokenFileMissingFromTheEnvironment", env: map[string]string{"DURABLE_TOKEN_FILE": missing}, want: 2, oneLine: "token file"},
		{name: "TokenAndTokenFile", args: []string{"--token", "t", "--token-file", missing}, want: 2, oneLine: "not both"},
		{name: "TLSCAMissing", args: []string{"--tls-ca", missing}, want: 2, oneLine: "missing"},
		{name: "TLSCertAndKeyMissing", args: []string{"--tls-cert", missing, "--tls-key", missing + "-key"}, want: 2, oneLine: "missing-key"},
		{name: "TLSCertWithoutKey", args: []string{"--tls-cert", missing}, want: 2, oneLine: "key"},
		{name: "RedriveRateZero", args: []string{"--redrive-rate", "0"}, want: 2, oneLine: "--redrive-rate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			getenv := func(k string) string { return c.env[k] }
			if got := run(c.args, getenv, &stderr); got != c.want {
				t.Fatalf("run(%v) = %d, want %d; stderr:\n%s", c.args, got, c.want, stderr.String())
			}
			if c.oneLine == "" {
				return
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "wfui: ") || !strings.Contains(out, c.oneLine) {
				t.Fatalf("stderr = %q, want one line starting \"wfui: \" that mentions %q", out, c.oneLine)
			}
		})
	}
}

func TestHelpNamesTheConnectionFlagsTheAuditViewAndOperations(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if got := run([]string{"--help"}, func(string) string { return "" }, &stderr); got != 0 {
		t.Fatalf("run(--help) = %d", got)
	}
	for _, want := range []string{"--token-file", "--tls-ca", "--tls-cert", "--tls-server-name", "DURABLE_TOKEN", "audit log (4)", "reason",
		"operations (5)", "--redrive-rate", "x cancels", "does not stop an operation"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestStillRunningNamesEachOperationAndHowToFollowIt(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	stillRunning(&out, []*durablev1.Operation{{Id: "op-7", Matched: 300, Released: 120}})
	want := "wfui: op-7 keeps running in the daemon (120 of 300 released when the console quit); " +
		"follow it with: wf ops describe op-7 · stop it with: wf ops cancel op-7\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
